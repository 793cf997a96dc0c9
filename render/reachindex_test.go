package render

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

// commit is one tree of a repository in these tests: its files and symlinks.
type commit struct {
	files, links map[string]string
}

func (c commit) clone() commit {
	return commit{files: maps.Clone(c.files), links: maps.Clone(c.links)}
}

func (c commit) write(t *testing.T) string {
	t.Helper()
	repo := testtree.Write(t, c.files)
	writeLinks(t, repo, c.links)
	return repo
}

// changedPaths lists what a comparison of the two commits names: every path
// added, modified or removed, files and symlinks alike.
func changedPaths(from, to commit) []string {
	var out []string
	for _, kind := range []func(commit) map[string]string{func(c commit) map[string]string { return c.files }, func(c commit) map[string]string { return c.links }} {
		a, b := kind(from), kind(to)
		for p, v := range a {
			if w, ok := b[p]; !ok || w != v {
				out = append(out, p)
			}
		}
		for p := range b {
			if _, ok := a[p]; !ok {
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// plannerSince opens a planner on repo as tree treeID, derived from the tree
// since with the changed paths, with every reach computed, as a plan's
// verification computes them.
func plannerSince(t *testing.T, ctx context.Context, repo, treeID string, since *PriorTree, apps []Application) *planner {
	t.Helper()
	p, err := newPlanner(ctx, Request{RepoDir: repo, TreeID: treeID, Since: since, Apps: apps, App: apps[0].Name,
		Target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}, Change: Change{Replicas: &Replicas{Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	p.precomputeReaches()()
	for _, app := range apps {
		p.reach(app)
	}
	return p
}

// treeRuns numbers the runs of the tests that name trees, so that a test run
// again in the same process (-count) names new trees: the reach indexes are
// kept per tree ID for the whole process, as they may be, since a real tree ID
// names one content, and a tree of the run before would be found in them.
var treeRuns atomic.Int64

// treeName is a tree ID no earlier run of this process has used.
func treeName(t *testing.T) string {
	return fmt.Sprintf("repo@%s-%d", t.Name(), treeRuns.Add(1))
}

// derived is the outcome of planning a new commit from the reaches of an old one.
type derived struct {
	old, next, fresh *planner
	logs             string
}

// derive plans on from (tree "<name>-old"), then on to (tree "<name>-new", Since
// the old one with the paths that differ), and without any TreeID on to.
func derive(t *testing.T, from, to commit, oldApps, newApps []Application) derived {
	t.Helper()
	tree := treeName(t)
	oldID, newID := tree+"-old", tree+"-new"
	old := plannerSince(t, context.Background(), from.write(t), oldID, nil, oldApps)
	repo := to.write(t)
	var logs bytes.Buffer
	ctx := zerolog.New(&logs).WithContext(context.Background())
	next := plannerSince(t, ctx, repo, newID, &PriorTree{TreeID: oldID, Changed: changedPaths(from, to)}, newApps)
	fresh := plannerSince(t, context.Background(), repo, "", nil, newApps)
	return derived{old: old, next: next, fresh: fresh, logs: logs.String()}
}

// agree checks that the derived tree's reaches say what fresh ones say for an
// edit of every file of the new tree under each of its names, and of a new file
// in every app.
func (d derived) agree(t *testing.T) {
	t.Helper()
	var edits [][]string
	for _, names := range namesOfFiles(t, d.fresh.req.RepoDir) {
		for _, n := range names {
			edits = append(edits, []string{n})
		}
	}
	for _, app := range d.fresh.apps {
		edits = append(edits, []string{path.Join(app.Path, "kukie-new.yaml")})
	}
	for _, edit := range edits {
		got, gotWarnings := affectedNames(d.next, edit)
		want, wantWarnings := affectedNames(d.fresh, edit)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotWarnings, wantWarnings) {
			t.Errorf("edit of %v: derived reaches give %v %v, fresh ones %v %v", edit, got, gotWarnings, want, wantWarnings)
		}
	}
	for _, app := range d.fresh.apps {
		got, want := d.next.reach(app).err, d.fresh.reach(app).err
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("application %s: derived reach fails with %v, a fresh one with %v", app.Name, got, want)
		}
	}
}

// carried lists the apps of the new tree whose reach is the old tree's.
func (d derived) carried() []string {
	var out []string
	for _, app := range d.next.apps {
		if slices.ContainsFunc(d.old.apps, func(a Application) bool { return a.Name == app.Name }) && d.next.reach(app) == d.old.reach(app) {
			out = append(out, app.Name)
		}
	}
	sort.Strings(out)
	return out
}

func appNames(apps []Application, except ...string) []string {
	var out []string
	for _, a := range apps {
		if !slices.Contains(except, a.Name) {
			out = append(out, a.Name)
		}
	}
	sort.Strings(out)
	return out
}

// TestDerivedReachesAgreeWithFresh changes each file of each reach repository in
// turn: the new tree's reaches, built from the old tree's and the changed path,
// give the same affected apps as fresh ones, and only the apps whose old reach
// read the file are read again.
func TestDerivedReachesAgreeWithFresh(t *testing.T) {
	for name, repoCase := range reachRepos {
		// Reaches computed in the background (many apps) go through reach the
		// same way; TestRememberedReachesAgreeWithFresh covers both.
		files, apps, _ := repoCase.setUp(t, false)
		from := commit{files: files, links: repoCase.links}
		for _, f := range slices.Sorted(maps.Keys(repoCase.files)) {
			t.Run(name+"/"+f, func(t *testing.T) {
				to := from.clone()
				to.files[f] += "\n# changed\n"
				d := derive(t, from, to, apps, apps)
				d.agree(t)
				var reread []string
				for _, app := range apps {
					if d.old.reaches(app, f) {
						reread = append(reread, app.Name)
					}
				}
				if got, want := d.carried(), appNames(apps, reread...); !reflect.DeepEqual(got, want) {
					t.Errorf("carried %v, want every app but those that read %s (%v): %v", got, f, reread, want)
				}
			})
		}
	}
}

// indexRepo is a base with two overlays, a standalone app, and a Directory app.
var indexRepo = commit{files: map[string]string{
	"bases/web/kustomization.yaml":   "resources:\n  - cm.yaml\n",
	"bases/web/cm.yaml":              configMap("web"),
	"overlays/a/kustomization.yaml":  "resources:\n  - ../../bases/web\n",
	"overlays/b/kustomization.yaml":  "resources:\n  - ../../bases/web\n",
	"alone/kustomization.yaml":       "resources:\n  - cm.yaml\n",
	"alone/cm.yaml":                  configMap("alone"),
	"plain/cm.yaml":                  configMap("plain"),
	"other/kustomization.yaml":       "resources:\n  - ../needed/cm.yaml\n",
	"linked/real/kustomization.yaml": "resources:\n  - cm.yaml\n",
	"linked/real/cm.yaml":            configMap("linked"),
}}

var indexApps = []Application{
	{Name: "a", Path: "overlays/a", SourceType: SourceKustomize, Namespace: "a"},
	{Name: "b", Path: "overlays/b", SourceType: SourceKustomize, Namespace: "b"},
	{Name: "alone", Path: "alone", SourceType: SourceKustomize, Namespace: "alone"},
	{Name: "plain", Path: "plain", SourceType: SourceDirectory, Namespace: "plain"},
	// other is refused in the first tree: the file it names is missing.
	{Name: "other", Path: "other", SourceType: SourceKustomize, Namespace: "other"},
}

// TestDerivedReachesReadOnlyWhatChanged: which apps a commit makes read again.
func TestDerivedReachesReadOnlyWhatChanged(t *testing.T) {
	cases := map[string]struct {
		change  func(c *commit, apps []Application) []Application
		carried []string
		// reads, when set, is a file the derived tree's reach of app must read.
		app, reads string
	}{
		"a base gains a resource: its overlays are read again": {
			change: func(c *commit, apps []Application) []Application {
				c.files["bases/web/kustomization.yaml"] = "resources:\n  - cm.yaml\n  - extra.yaml\n"
				c.files["bases/web/extra.yaml"] = configMap("extra")
				return apps
			},
			carried: []string{"alone", "plain"}, app: "a", reads: "bases/web/extra.yaml",
		},
		"a file no app reads": {
			change: func(c *commit, apps []Application) []Application {
				c.files["docs/README.md"] = "hello\n"
				return apps
			},
			carried: []string{"a", "alone", "b", "plain"},
		},
		"a file an app reads is renamed": {
			change: func(c *commit, apps []Application) []Application {
				delete(c.files, "alone/cm.yaml")
				c.files["alone/config.yaml"] = configMap("alone")
				c.files["alone/kustomization.yaml"] = "resources:\n  - config.yaml\n"
				return apps
			},
			carried: []string{"a", "b", "plain"}, app: "alone", reads: "alone/config.yaml",
		},
		"a file moves from one Directory app to another": {
			change: func(c *commit, apps []Application) []Application {
				delete(c.files, "plain/cm.yaml")
				c.files["plain2/cm.yaml"] = configMap("plain")
				return append(slices.Clone(apps), Application{Name: "plain2", Path: "plain2", SourceType: SourceDirectory, Namespace: "plain2"})
			},
			carried: []string{"a", "alone", "b"}, app: "plain2", reads: "plain2/cm.yaml",
		},
		"an app is added and one removed": {
			change: func(c *commit, apps []Application) []Application {
				delete(c.files, "overlays/b/kustomization.yaml")
				c.files["overlays/c/kustomization.yaml"] = "resources:\n  - ../../bases/web\n  - cm.yaml\n"
				c.files["overlays/c/cm.yaml"] = configMap("c")
				var out []Application
				for _, a := range apps {
					if a.Name != "b" {
						out = append(out, a)
					}
				}
				return append(out, Application{Name: "c", Path: "overlays/c", SourceType: SourceKustomize, Namespace: "c"})
			},
			carried: []string{"a", "alone", "plain"}, app: "c", reads: "bases/web/cm.yaml",
		},
		"a second kustomization file in a base": {
			change: func(c *commit, apps []Application) []Application {
				c.files["bases/web/kustomization.yml"] = "resources:\n  - cm.yaml\n"
				return apps
			},
			carried: []string{"alone", "plain"},
		},
		"the file a refused app missed is added": {
			change: func(c *commit, apps []Application) []Application {
				c.files["needed/cm.yaml"] = configMap("needed")
				return apps
			},
			carried: []string{"a", "alone", "b", "plain"}, app: "other", reads: "needed/cm.yaml",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			to := indexRepo.clone()
			apps := tc.change(&to, indexApps)
			d := derive(t, indexRepo, to, indexApps, apps)
			d.agree(t)
			if got := d.carried(); !reflect.DeepEqual(got, tc.carried) {
				t.Errorf("apps that kept their old reach: %v, want %v", got, tc.carried)
			}
			if tc.app != "" {
				i := slices.IndexFunc(apps, func(a Application) bool { return a.Name == tc.app })
				if !d.next.reaches(apps[i], tc.reads) {
					t.Errorf("application %s does not read %s in the new tree", tc.app, tc.reads)
				}
			}
			if strings.Contains(d.logs, "built in full") {
				t.Errorf("the index was built in full: %s", d.logs)
			}
		})
	}
}

// TestDerivedReachesFallBackOnSymlinks: a changed path on a symlink, in either
// tree, rebuilds every reach, and says so. The middle link of a chain counts
// (linked/base -> ../hop -> real, then hop becomes a directory of its own).
func TestDerivedReachesFallBackOnSymlinks(t *testing.T) {
	withLinks := indexRepo.clone()
	withLinks.links = map[string]string{"linked/base": "../hop", "hop": "linked/real"}
	withLinks.files["linked/app/kustomization.yaml"] = "resources:\n  - ../base\n"
	apps := append(slices.Clone(indexApps), Application{Name: "linked", Path: "linked/app", SourceType: SourceKustomize, Namespace: "linked"})
	cases := map[string]struct {
		change  func(c *commit)
		carried []string
		logged  bool
	}{
		"a symlink is pointed elsewhere": {
			change: func(c *commit) {
				c.links["hop"] = "bases/web"
			},
			logged: true,
		},
		"the middle of a chain becomes a directory": {
			change: func(c *commit) {
				delete(c.links, "hop")
				c.files["hop/kustomization.yaml"] = "resources:\n  - cm.yaml\n"
				c.files["hop/cm.yaml"] = configMap("hop")
			},
			// hop is no symlink in the new tree: only the old tree's record of
			// the chain shows that linked read through it.
			logged: true,
		},
		"a new symlink": {
			change: func(c *commit) {
				c.links["alone/more"] = "../plain"
			},
			logged: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			to := withLinks.clone()
			tc.change(&to)
			d := derive(t, withLinks, to, apps, apps)
			d.agree(t)
			if got := d.carried(); !reflect.DeepEqual(got, tc.carried) {
				t.Errorf("apps that kept their old reach: %v, want %v", got, tc.carried)
			}
			if got := strings.Contains(d.logs, "Reach index built in full"); got != tc.logged {
				t.Errorf("logged a full build: %v, want %v (%s)", got, tc.logged, d.logs)
			}
		})
	}
}

// TestDerivedReachesNeedTheOldTree: an earlier tree no plan read gives nothing
// to carry, and every reach is read.
func TestDerivedReachesNeedTheOldTree(t *testing.T) {
	repo := indexRepo.write(t)
	tree := treeName(t)
	since := &PriorTree{TreeID: tree + "-never-planned", Changed: []string{"alone/cm.yaml"}}
	next := plannerSince(t, context.Background(), repo, tree, since, indexApps)
	fresh := plannerSince(t, context.Background(), repo, "", nil, indexApps)
	for _, app := range indexApps {
		if fmt.Sprint(next.reach(app).err) != fmt.Sprint(fresh.reach(app).err) {
			t.Errorf("application %s: %v, fresh %v", app.Name, next.reach(app).err, fresh.reach(app).err)
		}
	}
	if got, want := affectedNamesOnly(next, []string{"bases/web/cm.yaml"}), affectedNamesOnly(fresh, []string{"bases/web/cm.yaml"}); !reflect.DeepEqual(got, want) {
		t.Errorf("affected %v, fresh %v", got, want)
	}
}

func affectedNamesOnly(p *planner, files []string) []string {
	names, _ := affectedNames(p, files)
	return names
}
