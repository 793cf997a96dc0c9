package render

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

const revertKustomization = "resources:\n  - deployment.yaml\n"

const revertDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  replicas: 1
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      containers:
        - name: api
          image: ghcr.io/example/api:1.0.0
`

// revertCase plans change on files, lets later edit the result (commits made
// after the change), and reverts the change on that.
type revertCase struct {
	files  map[string]string
	apps   []Application
	target objref.Target
	change Change
	later  func(files map[string]string)
}

func (c revertCase) run(t *testing.T) (orig *Result, now map[string]string, res *Result, err error) {
	t.Helper()
	ctx := context.Background()
	origDir := testtree.Write(t, c.files)
	orig, err = Plan(ctx, Request{RepoDir: origDir, Apps: c.apps, App: c.apps[0].Name, Target: c.target, Change: c.change})
	if err != nil {
		t.Fatalf("plan the change: %v", err)
	}
	now = map[string]string{}
	for p, content := range c.files {
		now[p] = content
	}
	for _, e := range orig.Edits {
		if e.New == nil && !e.Created {
			delete(now, e.Path)
			continue
		}
		now[e.Path] = string(e.New)
	}
	if c.later != nil {
		c.later(now)
	}
	res, err = Revert(ctx, RevertRequest{RepoDir: testtree.Write(t, now), Apps: c.apps, App: c.apps[0].Name,
		OriginalDir: origDir, Edits: orig.Edits})
	return orig, now, res, err
}

func reverted(t *testing.T, res *Result, path string) (string, bool) {
	t.Helper()
	for _, e := range res.Edits {
		if e.Path == path {
			return string(e.New), e.New != nil
		}
	}
	t.Fatalf("the revert does not edit %s (edits %v)", path, res.Edits)
	return "", false
}

func TestRevertRestoresWhatTheChangeReplaced(t *testing.T) {
	directory := []Application{{Name: "web", Path: "apps/web", SourceType: SourceDirectory, Namespace: "shop"}}
	scaleWeb := revertCase{
		files: map[string]string{"apps/web/deployment.yaml": twoContainerDeployment}, apps: directory,
		target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, change: Change{Replicas: &Replicas{Count: 5}},
	}

	t.Run("unchanged since", func(t *testing.T) {
		_, _, res, err := scaleWeb.run(t)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := reverted(t, res, "apps/web/deployment.yaml"); got != twoContainerDeployment {
			t.Errorf("reverted file:\n%s\nwant the file before the change", got)
		}
		if !res.Verification.Verified || res.Strategy != "revert" {
			t.Errorf("verification %+v, strategy %q", res.Verification, res.Strategy)
		}
		if len(res.ClusterDiff) != 1 || len(res.ClusterDiff[0].Changes) != 1 || res.ClusterDiff[0].Changes[0].Path != "spec.replicas" ||
			res.ClusterDiff[0].Changes[0].Before != "5" || res.ClusterDiff[0].Changes[0].After != "2" {
			t.Errorf("cluster diff %+v, want spec.replicas 5 → 2", res.ClusterDiff)
		}
		if len(res.Changed) != 1 || res.Changed[0].Object["spec"].(map[string]any)["replicas"] != int64(2) {
			t.Errorf("objects for the dry-run %+v, want the Deployment at 2 replicas", res.Changed)
		}
		if !strings.Contains(res.GitDiff, "-  replicas: 5\n+  replicas: 2\n") {
			t.Errorf("git diff:\n%s", res.GitDiff)
		}
	})

	t.Run("other lines changed since", func(t *testing.T) {
		c := scaleWeb
		c.later = func(files map[string]string) {
			files["apps/web/deployment.yaml"] = strings.Replace(files["apps/web/deployment.yaml"], "sidecar:1.0.0", "sidecar:1.1.0", 1)
		}
		_, _, res, err := c.run(t)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Replace(twoContainerDeployment, "sidecar:1.0.0", "sidecar:1.1.0", 1)
		if got, _ := reverted(t, res, "apps/web/deployment.yaml"); got != want {
			t.Errorf("reverted file:\n%s\nwant the later sidecar image kept and the replicas back:\n%s", got, want)
		}
		if len(res.ClusterDiff) != 1 || len(res.ClusterDiff[0].Changes) != 1 || res.ClusterDiff[0].Changes[0].Path != "spec.replicas" {
			t.Errorf("cluster diff %+v, want spec.replicas only", res.ClusterDiff)
		}
	})

	t.Run("image, other container changed since", func(t *testing.T) {
		c := scaleWeb
		c.change = Change{Image: &Image{Container: "web", Tag: "1.1.0"}}
		c.later = func(files map[string]string) {
			files["apps/web/deployment.yaml"] = strings.Replace(files["apps/web/deployment.yaml"], "sidecar:1.0.0", "sidecar:2.0.0", 1)
		}
		_, _, res, err := c.run(t)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Replace(twoContainerDeployment, "sidecar:1.0.0", "sidecar:2.0.0", 1)
		if got, _ := reverted(t, res, "apps/web/deployment.yaml"); got != want {
			t.Errorf("reverted file:\n%s\nwant:\n%s", got, want)
		}
		if len(res.ClusterDiff) != 1 || len(res.ClusterDiff[0].Changes) != 1 ||
			res.ClusterDiff[0].Changes[0].Path != "spec.template.spec.containers[name=web].image" {
			t.Errorf("cluster diff %+v, want the web image only", res.ClusterDiff)
		}
	})

	t.Run("new resource", func(t *testing.T) {
		c := revertCase{files: map[string]string{"apps/web/deployment.yaml": twoContainerDeployment}, apps: directory,
			change: Change{NewResource: &NewResource{Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\ndata:\n  beta: \"on\"\n"}}}
		orig, _, res, err := c.run(t)
		if err != nil {
			t.Fatal(err)
		}
		var created string
		for _, e := range orig.Edits {
			if e.Created {
				created = e.Path
			}
		}
		if _, kept := reverted(t, res, created); kept {
			t.Errorf("the revert keeps %s, which the change added", created)
		}
		if !strings.Contains(res.GitDiff, "deleted file mode 100644\n--- a/"+created+"\n+++ /dev/null\n") {
			t.Errorf("git diff does not delete %s:\n%s", created, res.GitDiff)
		}
		if len(res.ClusterDiff) != 1 || res.ClusterDiff[0].Action != "removed" || res.ClusterDiff[0].Name != "flags" {
			t.Errorf("cluster diff %+v, want ConfigMap flags removed", res.ClusterDiff)
		}
		if len(res.Changed) != 0 {
			t.Errorf("%d objects for the dry-run, want none (a removal)", len(res.Changed))
		}
	})
}

func TestRevertRestoresWhatADeletionRemoved(t *testing.T) {
	const flags = "# Feature flags.\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\ndata:\n  beta: \"on\"\n"
	deleteFlags := Change{DeleteResource: &DeleteResource{}}
	flagsTarget := objref.Target{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "flags"}
	restored := func(t *testing.T, res *Result) {
		t.Helper()
		if !res.Verification.Verified || len(res.ClusterDiff) != 1 || res.ClusterDiff[0].Action != "added" || res.ClusterDiff[0].Name != "flags" {
			t.Errorf("verification %+v, cluster diff %+v, want ConfigMap flags added back", res.Verification, res.ClusterDiff)
		}
	}

	t.Run("a document", func(t *testing.T) {
		file := twoContainerDeployment + "---\n" + flags
		c := revertCase{files: map[string]string{"apps/web/web.yaml": file},
			apps:   []Application{{Name: "web", Path: "apps/web", SourceType: SourceDirectory, Namespace: "shop"}},
			target: flagsTarget, change: deleteFlags}
		orig, _, res, err := c.run(t)
		if err != nil {
			t.Fatal(err)
		}
		if orig.Strategy != strategyRemoveDocument {
			t.Fatalf("the deletion is a %s", orig.Strategy)
		}
		if got, _ := reverted(t, res, "apps/web/web.yaml"); got != file {
			t.Errorf("reverted file:\n%s\nwant the file before the deletion", got)
		}
		restored(t, res)
	})

	t.Run("a file and its resources entry", func(t *testing.T) {
		kustomization := "resources:\n  - deployment.yaml\n  - flags.yaml # beta switches\n"
		c := revertCase{files: map[string]string{"apps/api/kustomization.yaml": kustomization, "apps/api/deployment.yaml": revertDeployment, "apps/api/flags.yaml": flags},
			apps:   []Application{{Name: "api", Path: "apps/api", SourceType: SourceKustomize, Namespace: "shop"}},
			target: flagsTarget, change: deleteFlags}
		orig, _, res, err := c.run(t)
		if err != nil {
			t.Fatal(err)
		}
		if orig.Strategy != strategyRemoveFile {
			t.Fatalf("the deletion is a %s", orig.Strategy)
		}
		if got, kept := reverted(t, res, "apps/api/flags.yaml"); !kept || got != flags {
			t.Errorf("reverted flags.yaml (%v):\n%s", kept, got)
		}
		if got, _ := reverted(t, res, "apps/api/kustomization.yaml"); got != kustomization {
			t.Errorf("reverted kustomization:\n%s", got)
		}
		restored(t, res)
	})
}

func TestRevertRefusesWhatChangedSince(t *testing.T) {
	kustomize := []Application{{Name: "api", Path: "apps/api", SourceType: SourceKustomize, Namespace: "shop"}}
	scaleAPI := revertCase{
		files: map[string]string{"apps/api/kustomization.yaml": revertKustomization, "apps/api/deployment.yaml": revertDeployment},
		apps:  kustomize, target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "api"}, change: Change{Replicas: &Replicas{Count: 3}},
	}
	cases := map[string]struct {
		later    func(files map[string]string)
		wantCode string
		wantIn   []string
	}{
		"the lines the change wrote": {
			later: func(files map[string]string) {
				files["apps/api/deployment.yaml"] = strings.Replace(files["apps/api/deployment.yaml"], "replicas: 3", "replicas: 7", 1)
			},
			wantCode: CodeNoLongerApplies, wantIn: []string{"apps/api/deployment.yaml", "line 6", "changed since"},
		},
		"the field the change set, from another file": {
			later: func(files map[string]string) {
				files["apps/api/kustomization.yaml"] += "replicas:\n  - name: api\n    count: 7\n"
			},
			wantCode: CodeNoLongerApplies, wantIn: []string{"Deployment.apps shop/api", "spec.replicas: the change set 3, it is 7 now"},
		},
		"a file the change edited, removed": {
			later: func(files map[string]string) {
				delete(files, "apps/api/deployment.yaml")
				files["apps/api/kustomization.yaml"] = "resources: []\n"
			},
			wantCode: CodeNoLongerApplies, wantIn: []string{"apps/api/deployment.yaml", "removed since"},
		},
		"reverted by hand already": {
			later: func(files map[string]string) {
				files["apps/api/deployment.yaml"] = revertDeployment
			},
			wantCode: CodeNoChange, wantIn: []string{"nothing to revert"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := scaleAPI
			c.later = tc.later
			_, _, res, err := c.run(t)
			var ref *Refusal
			if !errors.As(err, &ref) {
				t.Fatalf("revert: %v (result %+v), want a refusal", err, res)
			}
			if ref.Code != tc.wantCode {
				t.Errorf("refused with %s (%s), want %s", ref.Code, ref.Reason, tc.wantCode)
			}
			for _, want := range tc.wantIn {
				if !strings.Contains(ref.Reason, want) {
					t.Errorf("reason lacks %q: %s", want, ref.Reason)
				}
			}
		})
	}
}

// TestRevertNeverWritesTheRepository: like Plan, Revert only reads the trees.
func TestRevertNeverWritesTheRepository(t *testing.T) {
	c := revertCase{files: map[string]string{"apps/web/deployment.yaml": twoContainerDeployment},
		apps:   []Application{{Name: "web", Path: "apps/web", SourceType: SourceDirectory}},
		target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, change: Change{Replicas: &Replicas{Count: 5}}}
	orig, now, _, err := c.run(t)
	if err != nil {
		t.Fatal(err)
	}
	dir := testtree.Write(t, now)
	if _, err := Revert(context.Background(), RevertRequest{RepoDir: dir, Apps: c.apps, OriginalDir: testtree.Write(t, c.files), Edits: orig.Edits}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "apps/web/deployment.yaml"))
	if err != nil || string(got) != now["apps/web/deployment.yaml"] {
		t.Fatalf("the repository changed: %q, %v", got, err)
	}
}
