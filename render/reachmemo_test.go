package render

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

// newTestPlanner opens a planner on repo with the reaches of every app computed,
// in the background for many apps as Plan does.
func newTestPlanner(t *testing.T, repo, treeID string, apps []Application) *planner {
	t.Helper()
	p, err := newPlanner(context.Background(), Request{RepoDir: repo, TreeID: treeID, Apps: apps, App: apps[0].Name,
		Target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}, Change: Change{Replicas: &Replicas{Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	p.precomputeReaches()()
	return p
}

// affectedNames is what affected says about an edit of files: the apps, in order,
// and the warnings.
func affectedNames(p *planner, files []string) ([]string, []Warning) {
	apps, warnings := p.affected(files)
	names := make([]string, len(apps))
	for i, a := range apps {
		names[i] = a.Name
	}
	return names, warnings
}

// TestRememberedReachesAgreeWithFresh plans on each reach repository with a
// TreeID, twice, and checks that the second plan reuses the first one's reaches
// and names the same affected apps and warnings as a plan without a TreeID, for
// an edit of every file under each of its names, new files in every app, and all
// the new files at once.
func TestRememberedReachesAgreeWithFresh(t *testing.T) {
	for name, repoCase := range reachRepos {
		for _, padded := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/padded=%v", name, padded), func(t *testing.T) {
				_, apps, repo := repoCase.setUp(t, padded)
				treeID := "repo@" + t.Name()

				first := newTestPlanner(t, repo, treeID, apps)
				again := newTestPlanner(t, repo, treeID, apps)
				fresh := newTestPlanner(t, repo, "", apps)
				for _, app := range apps {
					if again.reach(app) != first.reach(app) {
						t.Fatalf("application %s: the second plan on tree %s computed its reach again", app.Name, treeID)
					}
					if fresh.reach(app) == first.reach(app) {
						t.Fatalf("application %s: a plan without a TreeID reused a remembered reach", app.Name)
					}
				}

				var edits [][]string
				var created []string
				for _, names := range namesOfFiles(t, repo) {
					for _, n := range names {
						edits = append(edits, []string{n})
					}
				}
				for _, app := range apps {
					f := path.Join(app.Path, "kukie-new.yaml")
					created = append(created, f)
					edits = append(edits, []string{f})
				}
				sort.Strings(created)
				edits = append(edits, created)
				for _, edit := range edits {
					gotApps, gotWarnings := affectedNames(again, edit)
					wantApps, wantWarnings := affectedNames(fresh, edit)
					if !reflect.DeepEqual(gotApps, wantApps) || !reflect.DeepEqual(gotWarnings, wantWarnings) {
						t.Errorf("edit of %v: remembered reaches give %v %v, fresh ones %v %v", edit, gotApps, gotWarnings, wantApps, wantWarnings)
					}
				}
			})
		}
	}
}

// TestRememberedReachesAreKeptPerTree changes a repository between plans: a plan
// with another TreeID sees the change, one with the same TreeID (wrongly reused
// for different content) does not, which shows the reach was remembered at all.
func TestRememberedReachesAreKeptPerTree(t *testing.T) {
	repo := testtree.Write(t, map[string]string{
		"base/kustomization.yaml":   "resources:\n  - cm.yaml\n",
		"base/cm.yaml":              configMap("base"),
		"a/kustomization.yaml":      "resources:\n  - ../base\n",
		"b/kustomization.yaml":      "resources:\n  - ../base\n",
		"b/cm.yaml":                 configMap("b"),
		"remote/kustomization.yaml": "resources:\n  - https://example.com/app.yaml\n",
	})
	apps := []Application{
		{Name: "a", Path: "a", SourceType: SourceKustomize, Namespace: "a"},
		{Name: "b", Path: "b", SourceType: SourceKustomize, Namespace: "b"},
		{Name: "remote", Path: "remote", SourceType: SourceKustomize, Namespace: "remote"},
	}
	edit := []string{"base/cm.yaml"}
	treeV1, treeV2 := "repo@"+t.Name()+"-v1", "repo@"+t.Name()+"-v2"

	v1 := newTestPlanner(t, repo, treeV1, apps)
	if got, _ := affectedNames(v1, edit); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("before the change, an edit of the base affects %v", got)
	}
	if again := newTestPlanner(t, repo, treeV1, apps); again.reach(apps[2]) != v1.reach(apps[2]) {
		t.Error("a refused reach (remote resource) was not remembered")
	}

	if err := os.WriteFile(filepath.Join(repo, "b", "kustomization.yaml"), []byte("resources:\n  - cm.yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v2 := newTestPlanner(t, repo, treeV2, apps)
	fresh := newTestPlanner(t, repo, "", apps)
	got, _ := affectedNames(v2, edit)
	want, _ := affectedNames(fresh, edit)
	if !reflect.DeepEqual(got, []string{"a"}) || !reflect.DeepEqual(got, want) {
		t.Errorf("tree %s: an edit of the base affects %v, a fresh plan says %v, want [a]", treeV2, got, want)
	}
	for _, app := range apps {
		if v2.reach(app) == v1.reach(app) {
			t.Errorf("application %s: tree %s reused the reach of tree %s", app.Name, treeV2, treeV1)
		}
	}

	stale := newTestPlanner(t, repo, treeV1, apps)
	if got, _ := affectedNames(stale, edit); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("the same TreeID gave %v: its reaches were not remembered", got)
	}
}

// TestPlanWithTreeIDMatchesPlanWithout runs whole plans, a verified one and a
// refused one, with a TreeID (cold, then warm) and without: same outcome.
func TestPlanWithTreeIDMatchesPlanWithout(t *testing.T) {
	repoCase := reachRepos["shared base, ../ chains and a component"]
	_, apps, repo := repoCase.setUp(t, true)
	cases := map[string]struct {
		app     string
		replica int64
		refusal string
	}{
		"overlay without patch": {app: "dev", replica: 3},
		"patch read by another": {app: "prod", replica: 7, refusal: CodeLeak},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := Request{RepoDir: repo, Apps: apps, App: tc.app,
				Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				Change: Change{Replicas: &Replicas{Count: tc.replica}}}
			wantRes, wantErr := Plan(context.Background(), req)
			var ref *Refusal
			refused := errors.As(wantErr, &ref) && ref.Code == tc.refusal
			if (tc.refusal == "" && wantErr != nil) || (tc.refusal != "" && !refused) {
				t.Fatalf("plan without TreeID = %v, want refusal %q", wantErr, tc.refusal)
			}
			req.TreeID = "repo@" + t.Name()
			for _, round := range []string{"cold", "warm"} {
				res, err := Plan(context.Background(), req)
				if !reflect.DeepEqual(res, wantRes) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
					t.Errorf("%s plan with TreeID = %+v, %v; without = %+v, %v", round, res, err, wantRes, wantErr)
				}
			}
		})
	}
}

func TestReachMemoIsLeastRecentlyUsed(t *testing.T) {
	key := func(tree string) reachMemoKey { return reachMemoKey{tree: tree, app: "app", source: "src"} }
	m := newReachMemo(3)
	a, b, c := m.call(key("a")), m.call(key("b")), m.call(key("c"))
	if m.call(key("a")) != a {
		t.Fatal("a remembered call was not returned")
	}
	m.call(key("d")) // evicts b, the least recently used
	if len(m.entries) != 3 || m.recent.Len() != 3 {
		t.Fatalf("memo of limit 3 holds %d entries (%d in order)", len(m.entries), m.recent.Len())
	}
	if m.call(key("b")) == b {
		t.Error("the least recently used entry was kept")
	}
	if m.call(key("a")) != a {
		t.Error("a recently used entry was evicted")
	}
	if m.call(reachMemoKey{tree: "a", app: "other", source: "src"}) == a {
		t.Error("another app of the same tree shares an entry")
	}

	m.forget(key("a"), c) // not a's call: kept
	if m.call(key("a")) != a {
		t.Error("forget dropped an entry holding another call")
	}
	m.forget(key("a"), a)
	if m.call(key("a")) == a {
		t.Error("a forgotten call was returned")
	}
}

// TestRememberedReachesConcurrentPlans shares one tree's reaches between planners
// computing them at the same time (run with -race).
func TestRememberedReachesConcurrentPlans(t *testing.T) {
	files := map[string]string{}
	apps := padApps(files, nil, 2*parallelReachThreshold)
	repo := testtree.Write(t, files)
	treeID := "repo@" + t.Name()
	reaches := make([][]*appReach, 4)
	var wg sync.WaitGroup
	for i := range reaches {
		wg.Go(func() {
			p, err := newPlanner(context.Background(), Request{RepoDir: repo, TreeID: treeID, Apps: apps, App: apps[0].Name,
				Target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}, Change: Change{Replicas: &Replicas{Count: 1}}})
			if err != nil {
				t.Error(err)
				return
			}
			defer p.precomputeReaches()()
			for _, app := range apps {
				reaches[i] = append(reaches[i], p.reach(app))
			}
		})
	}
	wg.Wait()
	for i := 1; i < len(reaches); i++ {
		for j := range apps {
			if reaches[i][j] != reaches[0][j] || reaches[i][j].err != nil {
				t.Fatalf("application %s: planners %d and 0 computed reaches %p and %p (error %v)", apps[j].Name, i, reaches[i][j], reaches[0][j], reaches[i][j].err)
			}
		}
	}
}
