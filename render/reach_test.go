package render

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
)

func configMap(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  k: v\n", name)
}

// reachRepos are repositories whose kustomizations reach files in every way render
// knows: shared bases, components (listed and given by the Application), "../"
// chains, patches, generators, and apps that only share a parent directory.
var reachRepos = map[string]struct {
	files map[string]string
	apps  []Application
}{
	"shared base, ../ chains and a component": {
		files: map[string]string{
			"bases/web/kustomization.yaml":        "resources:\n  - deployment.yaml\n  - ../../shared/common\n",
			"bases/web/deployment.yaml":           twoContainerDeployment,
			"shared/common/kustomization.yaml":    "resources:\n  - cm.yaml\n",
			"shared/common/cm.yaml":               configMap("common"),
			"components/debug/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n  - path: patch.yaml\n    target:\n      kind: ConfigMap\n",
			"components/debug/patch.yaml":         "- op: add\n  path: /data/debug\n  value: \"1\"\n",
			"overlays/prod/kustomization.yaml":    "resources:\n  - ../../bases/web\npatches:\n  - path: replicas.yaml\n",
			"overlays/prod/replicas.yaml":         "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 5\n",
			"overlays/dev/kustomization.yaml":     "resources:\n  - ../../bases/web\ncomponents:\n  - ../../components/debug\n",
			"overlays/deep/a/kustomization.yaml":  "resources:\n  - ../../prod\nconfigMapGenerator:\n  - name: gen\n    files:\n      - conf.txt\n",
			"overlays/deep/a/conf.txt":            "x=1\n",
			"standalone/kustomization.yaml":       "resources:\n  - cm.yaml\n",
			"standalone/cm.yaml":                  configMap("alone"),
			"plain/cm.yaml":                       configMap("plain"),
			"plain/sub/ignored.yaml":              configMap("ignored"),
		},
		apps: []Application{
			{Name: "prod", Path: "overlays/prod", SourceType: SourceKustomize, Namespace: "prod"},
			{Name: "dev", Path: "overlays/dev", SourceType: SourceKustomize, Namespace: "dev"},
			{Name: "deep", Path: "overlays/deep/a", SourceType: SourceKustomize, Namespace: "deep"},
			{Name: "standalone", Path: "standalone", SourceType: SourceKustomize, Namespace: "alone",
				Kustomize: KustomizeOptions{Components: []string{"../components/debug"}}},
			{Name: "base", Path: "bases/web", SourceType: SourceKustomize, Namespace: "base"},
			{Name: "plain", Path: "plain", SourceType: SourceDirectory, Namespace: "plain"},
			{Name: "annotated", Path: "standalone", SourceType: SourceKustomize, Namespace: "other",
				ManifestGeneratePaths: ".;/shared"},
		},
	},
	"parent directory shared, references in both directions": {
		files: map[string]string{
			"apps/kustomization.yaml":   "resources:\n  - a\n  - b/cm.yaml\n",
			"apps/a/kustomization.yaml": "resources:\n  - cm.yaml\n",
			"apps/a/cm.yaml":            configMap("a"),
			"apps/b/kustomization.yaml": "resources:\n  - cm.yaml\n  - ../a\n",
			"apps/b/cm.yaml":            configMap("b"),
			"apps/c/kustomization.yaml": "resources:\n  - cm.yaml\n",
			"apps/c/cm.yaml":            configMap("c"),
		},
		apps: []Application{
			{Name: "all", Path: "apps", SourceType: SourceKustomize, Namespace: "all"},
			{Name: "a", Path: "apps/a", SourceType: SourceKustomize, Namespace: "a"},
			{Name: "b", Path: "apps/b", SourceType: SourceKustomize, Namespace: "b"},
			{Name: "c", Path: "apps/c", SourceType: SourceKustomize, Namespace: "c"},
		},
	},
}

// padApps adds unrelated Applications until there are enough for their reaches to
// be computed in the background, so both ways of computing them are exercised.
func padApps(files map[string]string, apps []Application, to int) []Application {
	for i := 0; len(apps) < to; i++ {
		dir := fmt.Sprintf("filler/f%03d", i)
		files[dir+"/kustomization.yaml"] = "resources:\n  - cm.yaml\n"
		files[dir+"/cm.yaml"] = configMap(fmt.Sprintf("filler-%03d", i))
		apps = append(apps, Application{Name: "filler-" + dir[len("filler/"):], Path: dir, SourceType: SourceKustomize, Namespace: "filler"})
	}
	return apps
}

// TestReachNeverMissesAnAffectedApp breaks every file of each repository in turn
// and renders every Application with kustomize: an app whose render changes or
// fails must be among those the planner says read the file. The planner may say
// more, never less.
func TestReachNeverMissesAnAffectedApp(t *testing.T) {
	for name, repoCase := range reachRepos {
		for _, padded := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/padded=%v", name, padded), func(t *testing.T) {
				files := map[string]string{}
				for k, v := range repoCase.files {
					files[k] = v
				}
				apps := append([]Application(nil), repoCase.apps...)
				if padded {
					apps = padApps(files, apps, parallelReachThreshold+1)
				}
				repo := writeRepo(t, files)
				p, err := newPlanner(context.Background(), Request{RepoDir: repo, Apps: apps, App: apps[0].Name,
					Target: Target{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}, Change: Change{Replicas: &Replicas{Count: 1}}})
				if err != nil {
					t.Fatal(err)
				}
				stop := p.precomputeReaches()
				defer stop()
				for _, app := range apps {
					if _, err := p.render(p.before, app); err != nil {
						t.Fatalf("application %s does not render before any change: %v", app.Name, err)
					}
				}
				paths := make([]string, 0, len(files))
				for f := range files {
					paths = append(paths, f)
				}
				sort.Strings(paths)
				for _, f := range paths {
					broken := p.before.with(map[string][]byte{f: []byte("not: [valid\n")})
					affected, _ := p.affected([]string{f})
					inAffected := map[string]bool{}
					for _, a := range affected {
						inAffected[a.Name] = true
					}
					for _, app := range apps {
						before, _ := p.render(p.before, app)
						after, err := p.render(broken, app)
						changed := err != nil || !sameObjects(before, after)
						if changed && !inAffected[app.Name] {
							t.Errorf("breaking %s changes application %s, which the planner does not count as affected", f, app.Name)
						}
					}
				}
			})
		}
	}
}

func sameObjects(a, b []*object) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !deepEqual(a[i].body, b[i].body) {
			return false
		}
	}
	return true
}

// TestAffectedNamesEveryReader pins the affected apps for a few edits, the
// primary first; manifest-generate-paths adds an app that does not read the file.
func TestAffectedNamesEveryReader(t *testing.T) {
	repoCase := reachRepos["shared base, ../ chains and a component"]
	cases := map[string]struct {
		file string
		want []string
	}{
		"overlay's own patch":         {"overlays/prod/replicas.yaml", []string{"prod", "deep"}},
		"shared base file":            {"bases/web/deployment.yaml", []string{"prod", "dev", "deep", "base"}},
		"base of a base":              {"shared/common/cm.yaml", []string{"prod", "dev", "deep", "base", "annotated"}},
		"component patch":             {"components/debug/patch.yaml", []string{"prod", "dev", "standalone"}},
		"generator source":            {"overlays/deep/a/conf.txt", []string{"prod", "deep"}},
		"directory app, top level":    {"plain/cm.yaml", []string{"prod", "plain"}},
		"directory app, not recursed": {"plain/sub/ignored.yaml", []string{"prod"}},
		"new file in the overlay":     {"overlays/prod/kukie-deployment-web.yaml", []string{"prod"}},
	}
	for _, padded := range []bool{false, true} {
		files := map[string]string{}
		for k, v := range repoCase.files {
			files[k] = v
		}
		apps := append([]Application(nil), repoCase.apps...)
		if padded {
			apps = padApps(files, apps, parallelReachThreshold+1)
		}
		repo := writeRepo(t, files)
		for name, tc := range cases {
			t.Run(fmt.Sprintf("%s/padded=%v", name, padded), func(t *testing.T) {
				p, err := newPlanner(context.Background(), Request{RepoDir: repo, Apps: apps, App: "prod",
					Target: Target{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}, Change: Change{Replicas: &Replicas{Count: 1}}})
				if err != nil {
					t.Fatal(err)
				}
				defer p.precomputeReaches()()
				affected, _ := p.affected([]string{tc.file})
				var got []string
				for _, a := range affected {
					got = append(got, a.Name)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("affected by %s = %v, want %v", tc.file, got, tc.want)
				}
			})
		}
	}
}

func TestKustomizationMemo(t *testing.T) {
	a := []byte("resources:\n  - a.yaml\n")
	b := []byte("resources:\n  - b.yaml\n")
	m := newKustomizationMemo(1 << 20)
	ka, err := m.parse(a)
	if err != nil || !reflect.DeepEqual(ka.Resources, []string{"a.yaml"}) {
		t.Fatalf("parse = %+v, %v", ka, err)
	}
	if again, _ := m.parse([]byte(string(a))); again != ka {
		t.Error("the same content parsed twice")
	}
	if kb, _ := m.parse(b); !reflect.DeepEqual(kb.Resources, []string{"b.yaml"}) {
		t.Errorf("different content got %v", kb.Resources)
	}
	legacy, err := m.parse([]byte("bases:\n  - ../base\npatchesStrategicMerge:\n  - p.yaml\n"))
	if err != nil || !reflect.DeepEqual(legacy.Resources, []string{"../base"}) {
		t.Errorf("legacy fields are not moved: %+v, %v", legacy, err)
	}
	if _, err := m.parse([]byte("resources: [\n")); err == nil {
		t.Error("invalid YAML parsed")
	}
}

func TestKustomizationMemoStaysBounded(t *testing.T) {
	m := newKustomizationMemo(4096)
	for i := range 100 {
		if _, err := m.parse([]byte(fmt.Sprintf("namePrefix: p%d-\n", i))); err != nil {
			t.Fatal(err)
		}
		if m.size > m.limit {
			t.Fatalf("after %d parses the memo holds %d bytes, over its %d limit", i+1, m.size, m.limit)
		}
	}
	if len(m.entries) == 0 || len(m.entries) >= 100 {
		t.Errorf("memo holds %d entries", len(m.entries))
	}
	huge := []byte("namePrefix: " + strings.Repeat("x", 8192) + "\n")
	if k, err := m.parse(huge); err != nil || !strings.HasPrefix(k.NamePrefix, "xxx") {
		t.Fatalf("parse of a file over the limit = %v", err)
	}
	if _, kept := m.entries[string(huge)]; kept {
		t.Error("a file over the whole limit was kept")
	}
}

func TestKustomizationMemoConcurrent(t *testing.T) {
	m := newKustomizationMemo(1 << 20)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				data := []byte(fmt.Sprintf("namespace: ns-%d\n", (i+j)%10))
				k, err := m.parse(data)
				if err != nil || k.Namespace != fmt.Sprintf("ns-%d", (i+j)%10) {
					t.Errorf("parse %q = %+v, %v", data, k, err)
				}
			}
		})
	}
	wg.Wait()
}

// TestStatAgreesWithAndWithoutListing checks that a path looked up on its own and
// one looked up in a listed directory say the same, symlinks included.
func TestStatAgreesWithAndWithoutListing(t *testing.T) {
	repo := writeRepo(t, map[string]string{"d/file.yaml": "x", "d/sub/f": "y", "shared/s.yaml": "z"})
	outside := t.TempDir()
	for link, to := range map[string]string{"d/in": "../shared", "d/in-file": "../shared/s.yaml", "d/out": outside, "d/dangling": "missing"} {
		if err := os.Symlink(to, filepath.Join(repo, link)); err != nil {
			t.Fatal(err)
		}
	}
	names := []string{"d/file.yaml", "d/sub", "d/in", "d/in-file", "d/out", "d/dangling", "d/missing", "d/file.yaml/x"}
	listed, err := openTree(repo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := listed.readDir("d"); err != nil {
		t.Fatal(err)
	}
	// A fresh tree per name: each is looked up on its own, without a listing.
	aloneStat := func(n string) statEntry {
		alone, err := openTree(repo)
		if err != nil {
			t.Fatal(err)
		}
		return alone.stat(n)
	}
	for _, n := range names {
		a, l := aloneStat(n), listed.stat(n)
		if a.kind != l.kind || a.real != l.real || (a.err == nil) != (l.err == nil) {
			t.Errorf("%s: alone %+v, listed %+v", n, a, l)
		}
	}
	var ref *Refusal
	if st := aloneStat("d/out"); !errors.As(st.err, &ref) || ref.Code != CodeSymlinkEscape {
		t.Errorf("symlink leaving the repository: %+v", st)
	}
	if st := aloneStat("d/in"); st.kind != kindDir {
		t.Errorf("symlink within the repository: %+v", st)
	}
}
