package render

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

const twoContainerDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: ghcr.io/example/web:1.0.0
        - name: sidecar
          image: ghcr.io/example/sidecar:1.0.0
`

// TestVerifyCatchesWrongEdits injects edits that do more than the request and
// requires verification to refuse each, naming what differs.
func TestVerifyCatchesWrongEdits(t *testing.T) {
	repo := testtree.Write(t, map[string]string{"apps/web/deployment.yaml": twoContainerDeployment})
	apps := []Application{
		{Name: "web-eu", Path: "apps/web", SourceType: SourceDirectory, Namespace: "eu"},
		{Name: "web-us", Path: "apps/web", SourceType: SourceDirectory, Namespace: "us"},
	}
	cases := map[string]struct {
		change  Change
		edit    func(string) string
		wantIn  []string
		wantErr bool
		leak    bool
	}{
		"extra field": {
			change: Change{Replicas: &Replicas{Count: 3}},
			edit: func(s string) string {
				s = strings.Replace(s, "replicas: 2", "replicas: 3", 1)
				return strings.Replace(s, "  name: web\n", "  name: web\n  labels: {tier: front}\n", 1)
			},
			wantIn: []string{"metadata.labels", "unexpected field"},
		},
		"other container": {
			change: Change{Image: &Image{Container: "web", Tag: "1.1.0"}},
			edit: func(s string) string {
				return strings.ReplaceAll(s, ":1.0.0", ":1.1.0")
			},
			wantIn: []string{"containers[name=sidecar].image", "expected ghcr.io/example/sidecar:1.0.0"},
		},
		"missing part of the change": {
			change: Change{Env: &Env{Container: "web", Set: map[string]string{"A": "1", "B": "2"}}},
			edit: func(s string) string {
				return strings.Replace(s, "          image: ghcr.io/example/web:1.0.0\n", "          image: ghcr.io/example/web:1.0.0\n          env:\n            - name: A\n              value: \"1\"\n", 1)
			},
			wantIn: []string{"env[name=B]", "missing"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := newPlanner(context.Background(), Request{RepoDir: repo, Apps: apps[:1], App: "web-eu", Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, Change: tc.change})
			if err != nil {
				t.Fatal(err)
			}
			exp := expectationFor(t, p)
			src, _ := p.t.readFile("apps/web/deployment.yaml")
			c := &candidate{strategy: "injected", files: map[string][]byte{"apps/web/deployment.yaml": []byte(tc.edit(string(src)))}}
			vr, err := p.verify(context.Background(), c, exp)
			if err != nil {
				t.Fatal(err)
			}
			if vr.ok {
				t.Fatalf("verification accepted a wrong edit")
			}
			for _, w := range tc.wantIn {
				if !strings.Contains(vr.reason, w) {
					t.Errorf("reason %q does not mention %q", vr.reason, w)
				}
			}
		})
	}

	t.Run("other app", func(t *testing.T) {
		p, err := newPlanner(context.Background(), Request{RepoDir: repo, Apps: apps, App: "web-eu", Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, Change: Change{Replicas: &Replicas{Count: 3}}})
		if err != nil {
			t.Fatal(err)
		}
		exp := expectationFor(t, p)
		src, _ := p.t.readFile("apps/web/deployment.yaml")
		c := &candidate{strategy: "injected", files: map[string][]byte{"apps/web/deployment.yaml": []byte(strings.Replace(string(src), "replicas: 2", "replicas: 3", 1))}}
		vr, err := p.verify(context.Background(), c, exp)
		if err != nil {
			t.Fatal(err)
		}
		if vr.ok || !vr.leak || !strings.Contains(vr.reason, "application web-us") {
			t.Fatalf("verification did not name the other app: ok=%v leak=%v reason=%q", vr.ok, vr.leak, vr.reason)
		}
	})
}

func expectationFor(t *testing.T, p *planner) *changeExpectation {
	t.Helper()
	objs, err := p.render(p.before, p.primary)
	if err != nil {
		t.Fatal(err)
	}
	target, err := p.findTarget(p.primary, objs)
	if err != nil {
		t.Fatal(err)
	}
	expected, err := expectedAfter(target, p.req.Change)
	if err != nil {
		t.Fatal(err)
	}
	return &changeExpectation{primary: p.primary.Name, target: target.key(p.primary.Namespace), expected: expected}
}

// TestRefusalsFromTheFilesystem covers refusals that need files a golden case
// cannot hold: symlinks leaving the tree and files over the size limit.
func TestRefusalsFromTheFilesystem(t *testing.T) {
	target := objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	change := Change{Replicas: &Replicas{Count: 3}}
	cases := map[string]struct {
		setup func(t *testing.T, repo string)
		app   Application
		code  string
	}{
		"symlink leaving the repository (directory app)": {
			setup: func(t *testing.T, repo string) {
				outside := filepath.Join(t.TempDir(), "outside.yaml")
				if err := os.WriteFile(outside, []byte(twoContainerDeployment), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(outside, filepath.Join(repo, "apps/web/linked.yaml")); err != nil {
					t.Fatal(err)
				}
			},
			app:  Application{Name: "web", Path: "apps/web", SourceType: SourceDirectory, Namespace: "web"},
			code: CodeSymlinkEscape,
		},
		"symlinked base leaving the repository (kustomize app)": {
			setup: func(t *testing.T, repo string) {
				outside := t.TempDir()
				if err := os.WriteFile(filepath.Join(outside, "kustomization.yaml"), []byte("resources: []\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(outside, filepath.Join(repo, "base")); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(repo, "apps/web/kustomization.yaml"), []byte("resources:\n  - ../../base\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			app:  Application{Name: "web", Path: "apps/web", SourceType: SourceKustomize, Namespace: "web"},
			code: CodeSymlinkEscape,
		},
		"file over 5 MiB": {
			setup: func(t *testing.T, repo string) {
				big := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  blob: \"" + strings.Repeat("x", MaxFileSize) + "\"\n"
				if err := os.WriteFile(filepath.Join(repo, "apps/web/big.yaml"), []byte(big), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			app:  Application{Name: "web", Path: "apps/web", SourceType: SourceDirectory, Namespace: "web"},
			code: CodeFileTooLarge,
		},
		"app path escaping the repository": {
			setup: func(*testing.T, string) {},
			app:   Application{Name: "web", Path: "../elsewhere", SourceType: SourceDirectory, Namespace: "web"},
			code:  CodePathEscape,
		},
		"plugin source": {
			setup: func(*testing.T, string) {},
			app:   Application{Name: "web", Path: "apps/web", SourceType: SourcePlugin, Namespace: "web"},
			code:  CodeUnsupportedSource,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			repo := testtree.Write(t, map[string]string{"apps/web/deployment.yaml": twoContainerDeployment})
			tc.setup(t, repo)
			_, err := Plan(context.Background(), Request{RepoDir: repo, Apps: []Application{tc.app}, Target: target, Change: change})
			var ref *Refusal
			if !errors.As(err, &ref) {
				t.Fatalf("want refusal %s, got %v", tc.code, err)
			}
			if ref.Code != tc.code {
				t.Fatalf("want code %s, got %s: %s", tc.code, ref.Code, ref.Reason)
			}
		})
	}
}

// TestSymlinkInsideRepositoryIsFollowed checks that only symlinks leaving the
// repository are refused.
func TestSymlinkInsideRepositoryIsFollowed(t *testing.T) {
	repo := testtree.Write(t, map[string]string{"shared/deployment.yaml": twoContainerDeployment})
	if err := os.MkdirAll(filepath.Join(repo, "apps/web"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../shared/deployment.yaml", filepath.Join(repo, "apps/web/deployment.yaml")); err != nil {
		t.Fatal(err)
	}
	res, err := Plan(context.Background(), Request{RepoDir: repo,
		Apps:   []Application{{Name: "web", Path: "apps/web", SourceType: SourceDirectory, Namespace: "web"}},
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, Change: Change{Replicas: &Replicas{Count: 3}}})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if len(res.Edits) != 1 || res.Edits[0].Path != "shared/deployment.yaml" || !strings.Contains(string(res.Edits[0].New), "replicas: 3") {
		t.Fatalf("unexpected edits: %+v", res.Edits)
	}
}

func TestInvalidRequests(t *testing.T) {
	repo := testtree.Write(t, map[string]string{"apps/web/deployment.yaml": twoContainerDeployment})
	app := Application{Name: "web", Path: "apps/web", SourceType: SourceDirectory, Namespace: "web"}
	target := objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	cases := map[string]struct {
		req  Request
		code string
	}{
		"no change":           {Request{Apps: []Application{app}, Target: target}, CodeInvalidRequest},
		"two changes":         {Request{Apps: []Application{app}, Target: target, Change: Change{Replicas: &Replicas{Count: 1}, Image: &Image{Container: "web", Tag: "x"}}}, CodeInvalidRequest},
		"negative replicas":   {Request{Apps: []Application{app}, Target: target, Change: Change{Replicas: &Replicas{Count: -1}}}, CodeInvalidRequest},
		"bad quantity":        {Request{Apps: []Application{app}, Target: target, Change: Change{Resources: &Resources{Container: "web", Requests: map[string]string{"cpu": "lots"}}}}, CodeInvalidRequest},
		"bad tag":             {Request{Apps: []Application{app}, Target: target, Change: Change{Image: &Image{Container: "web", Tag: "a b"}}}, CodeInvalidRequest},
		"unknown app":         {Request{Apps: []Application{app}, App: "nope", Target: target, Change: Change{Replicas: &Replicas{Count: 1}}}, CodeInvalidRequest},
		"unknown container":   {Request{Apps: []Application{app}, Target: target, Change: Change{Image: &Image{Container: "db", Tag: "2"}}}, CodeContainerNotFound},
		"already so":          {Request{Apps: []Application{app}, Target: target, Change: Change{Replicas: &Replicas{Count: 2}}}, CodeNoChange},
		"image name mismatch": {Request{Apps: []Application{app}, Target: target, Change: Change{Image: &Image{Container: "web", Name: "nginx", Tag: "2"}}}, CodeInvalidRequest},
		"env set and unset":   {Request{Apps: []Application{app}, Target: target, Change: Change{Env: &Env{Container: "web", Set: map[string]string{"A": "1"}, Unset: []string{"A"}}}}, CodeInvalidRequest},
		"target without kind": {Request{Apps: []Application{app}, Target: objref.Target{Name: "web"}, Change: Change{Replicas: &Replicas{Count: 1}}}, CodeInvalidRequest},
		// Refused when the request is submitted too (Change.Validate), and here again.
		"no possible container": {Request{Apps: []Application{app}, Target: target, Change: Change{Image: &Image{Container: "Web", Tag: "2"}}}, CodeInvalidRequest},
		"bad label key":         {Request{Apps: []Application{app}, Target: target, Change: Change{Patch: &Patch{Merge: map[string]any{"metadata": map[string]any{"labels": map[string]any{"a b": "x"}}}}}}, CodeInvalidRequest},
		"unparsable manifest":   {Request{Apps: []Application{app}, Change: Change{NewResource: &NewResource{Manifest: "kind: [x"}}}, CodeInvalidRequest},
		"duplicate app names":   {Request{Apps: []Application{app, app}, App: "web", Target: target, Change: Change{Replicas: &Replicas{Count: 1}}}, CodeInvalidRequest},
		"ambiguous app choice":  {Request{Apps: []Application{app, {Name: "other", Path: "apps/web", SourceType: SourceDirectory}}, Target: target, Change: Change{Replicas: &Replicas{Count: 1}}}, CodeInvalidRequest},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.req.RepoDir = repo
			_, err := Plan(context.Background(), tc.req)
			var ref *Refusal
			if !errors.As(err, &ref) || ref.Code != tc.code {
				t.Fatalf("want refusal %s, got %v", tc.code, err)
			}
		})
	}
}

// TestConcurrentPlans runs kustomize plans at once; with -race it checks that
// builds sharing kustomize's global state are serialised.
func TestConcurrentPlans(t *testing.T) {
	repo := testtree.Write(t, map[string]string{
		"base/kustomization.yaml": "resources:\n  - deployment.yaml\n",
		"base/deployment.yaml":    twoContainerDeployment,
		"a/kustomization.yaml":    "resources:\n  - ../base\nnamePrefix: a-\n",
		"b/kustomization.yaml":    "resources:\n  - ../base\nnamePrefix: b-\n",
	})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := []string{"a", "b"}[i%2]
			res, err := Plan(context.Background(), Request{RepoDir: repo,
				Apps:   []Application{{Name: name, Path: name, SourceType: SourceKustomize, Namespace: name}},
				Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: name + "-web"}, Change: Change{Replicas: &Replicas{Count: int64(3 + i)}}})
			if err == nil && res.Strategy != strategyNewReplicasEntry {
				err = errors.New("unexpected strategy " + res.Strategy)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestManyAppsOnlyAffectedRendered plans in a repository with more Applications than
// the parallel reach threshold and checks that only the edited overlay's app is
// verified.
func TestManyAppsOnlyAffectedRendered(t *testing.T) {
	files := map[string]string{
		"base/kustomization.yaml": "resources:\n  - deployment.yaml\n",
		"base/deployment.yaml":    twoContainerDeployment,
	}
	var apps []Application
	for i := range parallelReachThreshold + 16 {
		dir := "overlays/o" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + strings.Repeat("0", i/26)
		files[dir+"/kustomization.yaml"] = "resources:\n  - ../../base\nnamespace: " + "ns-" + filepath.Base(dir) + "\n"
		apps = append(apps, Application{Name: "app-" + filepath.Base(dir), Path: dir, SourceType: SourceKustomize, Namespace: "ns-" + filepath.Base(dir)})
	}
	repo := testtree.Write(t, files)
	res, err := Plan(context.Background(), Request{RepoDir: repo, Apps: apps, App: apps[7].Name,
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, Change: Change{Replicas: &Replicas{Count: 9}}})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if len(res.Verification.Apps) != 1 || res.Verification.Apps[0].App != apps[7].Name {
		t.Fatalf("verified apps: %+v", res.Verification.Apps)
	}
}

// TestDifferencesSayTheTypeOfValuesThatPrintAlike: the string "false" and the
// boolean false (a quoted values key, an unquoted annotation) differ, and the
// reason must say how, not "expected false, rendered false".
func TestDifferencesSayTheTypeOfValuesThatPrintAlike(t *testing.T) {
	dep := &object{apiVersion: "apps/v1", kind: "Deployment", name: "web"}
	diffs := []difference{
		{segs: []string{"metadata", "annotations", "prometheus.io/scrape"}, want: false, got: "false"},
		{segs: []string{"spec", "replicas"}, want: int64(3), got: "3"},
		{segs: []string{"spec", "minReadySeconds"}, want: int64(3), got: int64(5)},
	}
	got := describeDifferences(dep, diffs)
	want := []string{
		`metadata.annotations.prometheus.io/scrape: expected false (a boolean), rendered "false" (a string)`,
		`spec.replicas: expected 3 (a number), rendered "3" (a string)`,
		`spec.minReadySeconds: expected 3, rendered 5`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("differences\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
