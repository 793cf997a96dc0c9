package render

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

func configMap(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  k: v\n", name)
}

// reachRepos are repositories whose kustomizations reach files in every way render
// knows: shared bases, components (listed and given by the Application), "../"
// chains, patches, generators, apps that only share a parent directory, and files
// read under another name through symlinks inside the repository.
var reachRepos = map[string]reachRepo{
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
	"symlinked directories, files and application paths": {
		files: map[string]string{
			"bases/web/kustomization.yaml":          "resources:\n  - deployment.yaml\n  - ../../shared/common\n",
			"bases/web/deployment.yaml":             twoContainerDeployment,
			"shared/common/kustomization.yaml":      "resources:\n  - cm.yaml\n",
			"shared/common/cm.yaml":                 configMap("common"),
			"apps/linked/kustomization.yaml":        "resources:\n  - base\n",
			"apps/linked-patch/kustomization.yaml":  "resources:\n  - ../linked\npatches:\n  - path: replicas.yaml\n",
			"apps/linked-patch/replicas.yaml":       "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 5\n",
			"apps/files/service.yaml":               "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n    - port: 80\n",
			"apps/recursive/cm.yaml":                configMap("recursive"),
			"apps/recursive-target/deep/extra.yaml": configMap("extra"),
		},
		links: map[string]string{
			"apps/linked/base":           "../../bases/web",
			"apps/files/deployment.yaml": "../../bases/web/deployment.yaml",
			"apps/path":                  "../bases/web",
			"apps/recursive/common":      "../../shared/common",
			"apps/recursive/more":        "../recursive-target",
		},
		apps: []Application{
			{Name: "base", Path: "bases/web", SourceType: SourceKustomize, Namespace: "base"},
			{Name: "linked", Path: "apps/linked", SourceType: SourceKustomize, Namespace: "linked"},
			{Name: "linked-patch", Path: "apps/linked-patch", SourceType: SourceKustomize, Namespace: "patched"},
			{Name: "files", Path: "apps/files", SourceType: SourceDirectory, Namespace: "files"},
			{Name: "path", Path: "apps/path", SourceType: SourceKustomize, Namespace: "path"},
			{Name: "recursive", Path: "apps/recursive", SourceType: SourceDirectory, Namespace: "rec",
				Directory: DirectoryOptions{Recurse: true}},
		},
	},
	"symlinked base and file, no references out of them": {
		files: map[string]string{
			"shared/common/kustomization.yaml": "resources:\n  - cm.yaml\n",
			"shared/common/cm.yaml":            configMap("common"),
			"apps/direct/kustomization.yaml":   "resources:\n  - ../../shared/common\n",
			"apps/linked/kustomization.yaml":   "resources:\n  - common\n",
			"apps/plain/own.yaml":              configMap("own"),
		},
		links: map[string]string{
			"apps/linked/common": "../../shared/common",
			"apps/plain/cm.yaml": "../../shared/common/cm.yaml",
		},
		apps: []Application{
			{Name: "direct", Path: "apps/direct", SourceType: SourceKustomize, Namespace: "direct"},
			{Name: "linked", Path: "apps/linked", SourceType: SourceKustomize, Namespace: "linked"},
			{Name: "plain", Path: "apps/plain", SourceType: SourceDirectory, Namespace: "plain"},
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

// reachRepo is one repository of reachRepos.
type reachRepo struct {
	files map[string]string
	// links are symlinks: link path to target, relative to the link.
	links map[string]string
	apps  []Application
}

// setUp writes the repository, with filler apps beyond the parallel-reach threshold
// when padded, and returns its files (a copy the caller may change), Applications
// and directory.
func (c reachRepo) setUp(t *testing.T, padded bool) (files map[string]string, apps []Application, repo string) {
	t.Helper()
	files = map[string]string{}
	for k, v := range c.files {
		files[k] = v
	}
	apps = append([]Application(nil), c.apps...)
	if padded {
		apps = padApps(files, apps, parallelReachThreshold+1)
	}
	repo = testtree.Write(t, files)
	writeLinks(t, repo, c.links)
	return files, apps, repo
}

// TestReachNeverMissesAnAffectedApp breaks every file of each repository in turn,
// on disk, and renders every Application with kustomize from the broken
// repository: an app whose render changes or fails must be among those the
// planner says read the file, under every name the file has (symlinks). Breaking
// the file in a view under any of its names must change the same apps as on disk.
// The planner may say more, never less.
func TestReachNeverMissesAnAffectedApp(t *testing.T) {
	for name, repoCase := range reachRepos {
		for _, padded := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/padded=%v", name, padded), func(t *testing.T) {
				files, apps, repo := repoCase.setUp(t, padded)
				p, err := newPlanner(context.Background(), Request{RepoDir: repo, Apps: apps, App: apps[0].Name,
					Target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}, Change: Change{Replicas: &Replicas{Count: 1}}})
				if err != nil {
					t.Fatal(err)
				}
				stop := p.precomputeReaches()
				defer stop()
				before := map[string][]*object{}
				for _, app := range apps {
					if before[app.Name], err = p.render(p.before, app); err != nil {
						t.Fatalf("application %s does not render before any change: %v", app.Name, err)
					}
				}
				names := namesOfFiles(t, repo)
				paths := make([]string, 0, len(files))
				for f := range files {
					paths = append(paths, f)
				}
				sort.Strings(paths)
				broken := []byte("not: [valid\n")
				for _, f := range paths {
					if !slices.Contains(names[f], f) {
						t.Fatalf("%s is not found on disk under its own name", f)
					}
					full := filepath.Join(repo, filepath.FromSlash(f))
					if err := os.WriteFile(full, broken, 0o644); err != nil {
						t.Fatal(err)
					}
					tr, err := openTree(repo)
					if err != nil {
						t.Fatal(err)
					}
					onDisk := changedApps(t, apps, before, newView(tr, nil))
					if err := os.WriteFile(full, []byte(files[f]), 0o644); err != nil {
						t.Fatal(err)
					}
					for _, n := range names[f] {
						affected, _ := p.affected([]string{n})
						inAffected := map[string]bool{}
						for _, a := range affected {
							inAffected[a.Name] = true
						}
						for _, app := range onDisk {
							if !inAffected[app] {
								t.Errorf("breaking %s (as %s) changes application %s, which the planner does not count as affected", f, n, app)
							}
						}
						if n == f && len(names[f]) == 1 {
							continue // nothing to compare the overlay with
						}
						if inView := changedApps(t, apps, before, p.before.with(map[string][]byte{n: broken})); !reflect.DeepEqual(inView, onDisk) {
							t.Errorf("breaking %s as %s in a view changes %v, on disk %v", f, n, inView, onDisk)
						}
					}
				}
			})
		}
	}
}

// changedApps renders every app from v and names those whose render differs
// from before or fails.
func changedApps(t *testing.T, apps []Application, before map[string][]*object, v *view) []string {
	t.Helper()
	var out []string
	for _, app := range apps {
		after, err := renderApp(context.Background(), v, app, false)
		if err != nil || !sameObjects(before[app.Name], after) {
			out = append(out, app.Name)
		}
	}
	return out
}

// namesOfFiles walks the repository on disk, symlinks followed, and lists for each
// real file every path it can be read under (its real path first).
func namesOfFiles(t *testing.T, repo string) map[string][]string {
	t.Helper()
	root, err := filepath.EvalSymlinks(repo)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	var walk func(rel string, depth int)
	walk = func(rel string, depth int) {
		if depth > 8 {
			t.Fatalf("%s: symlinks nest too deep for this test", rel)
		}
		entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			p := path.Join(rel, e.Name())
			full := filepath.Join(root, filepath.FromSlash(p))
			info, err := os.Stat(full)
			if err != nil {
				continue // a dangling or outside symlink names no repository file
			}
			if info.IsDir() {
				walk(p, depth+1)
				continue
			}
			real, err := filepath.EvalSymlinks(full)
			if err != nil {
				t.Fatal(err)
			}
			within, err := filepath.Rel(root, real)
			if err != nil || strings.HasPrefix(within, "..") {
				continue
			}
			out[filepath.ToSlash(within)] = append(out[filepath.ToSlash(within)], p)
		}
	}
	walk(".", 0)
	for real, names := range out {
		sort.Slice(names, func(i, j int) bool {
			if names[i] == real || names[j] == real {
				return names[i] == real && names[j] != real
			}
			return names[i] < names[j]
		})
	}
	return out
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
		_, apps, repo := repoCase.setUp(t, padded)
		for name, tc := range cases {
			t.Run(fmt.Sprintf("%s/padded=%v", name, padded), func(t *testing.T) {
				p, err := newPlanner(context.Background(), Request{RepoDir: repo, Apps: apps, App: "prod",
					Target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}, Change: Change{Replicas: &Replicas{Count: 1}}})
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
	repo := testtree.Write(t, map[string]string{"d/file.yaml": "x", "d/sub/f": "y", "shared/s.yaml": "z"})
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
		if a.kind != l.kind || a.real != l.real || a.canon != l.canon || a.dangling != l.dangling || (a.err == nil) != (l.err == nil) {
			t.Errorf("%s: alone %+v, listed %+v", n, a, l)
		}
	}
	var ref *Refusal
	if st := aloneStat("d/out"); !errors.As(st.err, &ref) || ref.Code != CodeSymlinkEscape {
		t.Errorf("symlink leaving the repository: %+v", st)
	}
	if st := aloneStat("d/in"); st.kind != kindDir || st.canon != "shared" {
		t.Errorf("symlink within the repository: %+v", st)
	}
	for name, want := range map[string]string{"d/in-file": "shared/s.yaml", "d/in/s.yaml": "shared/s.yaml", "d/in/new.yaml": "shared/new.yaml", "d/dangling": "d/dangling", "d/file.yaml": "d/file.yaml"} {
		if st := aloneStat(name); st.canon != want {
			t.Errorf("canonical path of %s = %q, want %q", name, st.canon, want)
		}
	}
	if st := aloneStat("d/dangling"); !st.dangling || st.kind != kindNone {
		t.Errorf("dangling symlink: %+v", st)
	}
}

// TestAffectedCountsWhatHelmChartsRead: a kustomization's helmCharts read the
// chart under chartHome (helmGlobals, "charts" by default; <name>-<version>
// below it for a chart with a repo and a version), the values file and the
// additional values files, wherever they are: a change of one reaches the app
// (and an overlay of it). These apps cannot render offline (kustomize would
// run helm), so they are not among reachRepos, whose every app renders.
func TestAffectedCountsWhatHelmChartsRead(t *testing.T) {
	chart := map[string]string{
		"Chart.yaml":                "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"values.yaml":               "replicaCount: 1\n",
		"templates/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n",
	}
	files := map[string]string{
		"apps/web/kustomization.yaml": "helmGlobals:\n  chartHome: ../../charts\nhelmCharts:\n  - name: web\n    releaseName: web\n" +
			"    valuesFile: values.yaml\n    additionalValuesFiles:\n      - ../../shared/values-eu.yaml\n",
		"apps/web/values.yaml":             "replicaCount: 2\n",
		"shared/values-eu.yaml":            "region: eu\n",
		"apps/web-prod/kustomization.yaml": "resources:\n  - ../web\n",
		// The default chartHome, a chart pulled at a version (vendored where
		// helm pulls it to) and its own values.yaml as the values file.
		"apps/pulled/kustomization.yaml": "helmCharts:\n  - name: web\n    repo: https://charts.example.com\n    version: 1.2.3\n",
		// The older helmChartInflationGenerator spelling.
		"apps/legacy/kustomization.yaml": "helmChartInflationGenerator:\n  - chartName: web\n    chartHome: ../../charts\n    values: ../../shared/legacy.yaml\n",
		"shared/legacy.yaml":             "replicaCount: 3\n",
		"shared/unread.yaml":             "replicaCount: 4\n",
	}
	for f, data := range chart {
		files["charts/web/"+f] = data
		files["apps/pulled/charts/web-1.2.3/web/"+f] = data
	}
	files["apps/pulled/charts/web/values.yaml"] = "replicaCount: 5\n" // not the version helm pulls
	repo := testtree.Write(t, files)
	apps := []Application{
		{Name: "web", Path: "apps/web", SourceType: SourceKustomize, Namespace: "web"},
		{Name: "web-prod", Path: "apps/web-prod", SourceType: SourceKustomize, Namespace: "web-prod"},
		{Name: "pulled", Path: "apps/pulled", SourceType: SourceKustomize, Namespace: "pulled"},
		{Name: "legacy", Path: "apps/legacy", SourceType: SourceKustomize, Namespace: "legacy"},
	}
	cases := map[string][]string{
		"apps/web/values.yaml":                         {"web", "web-prod"},
		"shared/values-eu.yaml":                        {"web", "web-prod"},
		"charts/web/templates/deployment.yaml":         {"web", "web-prod", "legacy"},
		"charts/web/values.yaml":                       {"web", "web-prod", "legacy"},
		"charts/web/templates/new-service.yaml":        {"web", "web-prod", "legacy"},
		"apps/pulled/charts/web-1.2.3/web/values.yaml": {"pulled"},
		"apps/pulled/charts/web/values.yaml":           nil,
		"shared/legacy.yaml":                           {"legacy"},
		"shared/unread.yaml":                           nil,
	}
	checkAffected(t, repo, apps, cases)
}

// checkAffected checks, for each file of cases, the names of the apps that
// Affected says an edit of it reaches, in the order of apps.
func checkAffected(t *testing.T, repo string, apps []Application, cases map[string][]string) {
	t.Helper()
	for file, want := range cases {
		t.Run(file, func(t *testing.T) {
			reached, err := Affected(context.Background(), repo, "", apps, []string{file})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range reached {
				got = append(got, r.App.Name)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("affected by %s = %v, want %v", file, got, want)
			}
		})
	}
}
