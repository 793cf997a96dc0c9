package render

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

// writeLinks adds symlinks to a repository written by writeRepo: each key is the
// link's repository path, each value what it points to, relative to the link.
func writeLinks(t *testing.T, repo string, links map[string]string) {
	t.Helper()
	for link, to := range links {
		full := filepath.Join(repo, filepath.FromSlash(link))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.FromSlash(to), full); err != nil {
			t.Fatal(err)
		}
	}
}

// symlinkedBaseRepo is a base deployed directly by one app and reached through an
// in-repository symlink by others: a directory symlink used as a kustomize base, a
// file symlink read by a Directory app, a Kustomize app whose own path is a
// symlink to the base, and a Helm chart (whose reads render cannot know) with a
// symlink to it.
var symlinkedBaseRepo = struct {
	files map[string]string
	links map[string]string
}{
	files: map[string]string{
		"bases/web/kustomization.yaml":       "resources:\n  - deployment.yaml\n  - ../../shared/common\n",
		"bases/web/deployment.yaml":          twoContainerDeployment,
		"shared/common/kustomization.yaml":   "resources:\n  - cm.yaml\n",
		"shared/common/cm.yaml":              configMap("common"),
		"apps/dir-linked/kustomization.yaml": "resources:\n  - base\n",
		"apps/chart/Chart.yaml":              "apiVersion: v2\nname: web\nversion: 1.0.0\n",
		"apps/file-linked/service.yaml":      "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n    - port: 80\n",
	},
	links: map[string]string{
		"apps/dir-linked/base":             "../../bases/web",
		"apps/file-linked/deployment.yaml": "../../bases/web/deployment.yaml",
		"apps/path-linked":                 "../bases/web",
		"apps/chart/templates":             "../../bases/web",
	},
}

var (
	baseApp       = Application{Name: "base", Path: "bases/web", SourceType: SourceKustomize, Namespace: "base"}
	dirLinkedApp  = Application{Name: "dir-linked", Path: "apps/dir-linked", SourceType: SourceKustomize, Namespace: "dir"}
	fileLinkedApp = Application{Name: "file-linked", Path: "apps/file-linked", SourceType: SourceDirectory, Namespace: "file"}
	pathLinkedApp = Application{Name: "path-linked", Path: "apps/path-linked", SourceType: SourceKustomize, Namespace: "path"}
	chartApp      = Application{Name: "chart", Path: "apps/chart", SourceType: SourceHelm, Namespace: "chart"}
)

func writeSymlinkedBaseRepo(t *testing.T) string {
	t.Helper()
	repo := testtree.Write(t, symlinkedBaseRepo.files)
	writeLinks(t, repo, symlinkedBaseRepo.links)
	return repo
}

// TestEditThroughSymlinkReachesEveryAlias edits a file one app reads under its real
// name while another reads it through an in-repository symlink (or the other way
// round): the other app must be verified with every edit of the shared file, so
// such an edit is refused as a leak naming it, and an edit that wins (elsewhere)
// leaves the shared file alone.
func TestEditThroughSymlinkReachesEveryAlias(t *testing.T) {
	const shared = "bases/web/deployment.yaml"
	cases := map[string]struct {
		primary Application
		other   Application
	}{
		"directory symlink used as a kustomize base": {primary: baseApp, other: dirLinkedApp},
		"file symlink read by a directory app":       {primary: baseApp, other: fileLinkedApp},
		"application path that is a symlink":         {primary: baseApp, other: pathLinkedApp},
		"edit located through an application path":   {primary: pathLinkedApp, other: baseApp},
		"edit located through a file symlink":        {primary: fileLinkedApp, other: baseApp},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			repo := writeSymlinkedBaseRepo(t)
			res, err := Plan(context.Background(), Request{RepoDir: repo, Apps: []Application{tc.primary, tc.other}, App: tc.primary.Name,
				Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, Change: Change{Replicas: &Replicas{Count: 4}}})
			var attempts []Attempt
			var ref *Refusal
			switch {
			case errors.As(err, &ref):
				if ref.Code != CodeLeak {
					t.Fatalf("want %s, got %s: %s", CodeLeak, ref.Code, ref.Reason)
				}
				attempts = ref.Attempts
			case err != nil:
				t.Fatal(err)
			default:
				for _, e := range res.Edits {
					if e.Path == shared {
						t.Errorf("the winning edit changes %s, which application %s also reads", shared, tc.other.Name)
					}
				}
				attempts = res.Verification.Attempts
			}
			caught := false
			for _, a := range attempts {
				if slices.Contains(a.Files, shared) && !a.Verified && strings.Contains(a.Reason, "changes application "+tc.other.Name) {
					caught = true
				}
			}
			if !caught {
				t.Errorf("editing %s was not refused as a leak into application %s: %+v", shared, tc.other.Name, attempts)
			}
			if data, _ := os.ReadFile(filepath.Join(repo, shared)); string(data) != twoContainerDeployment {
				t.Error("the repository was modified")
			}
		})
	}
}

// TestEditThroughSymlinkIsMadeToTheRealFile: an app that alone reads a file through
// a symlink gets its edit on the real file.
func TestEditThroughSymlinkIsMadeToTheRealFile(t *testing.T) {
	cases := map[string]struct {
		app  Application
		want []string
	}{
		"file symlink": {fileLinkedApp, []string{"bases/web/deployment.yaml"}},
		"path symlink": {pathLinkedApp, []string{"bases/web/deployment.yaml"}},
		// The base is not the overlay's own folder, whatever its name: a replicas
		// entry in the overlay.
		"directory symlink": {dirLinkedApp, []string{"apps/dir-linked/kustomization.yaml"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			repo := writeSymlinkedBaseRepo(t)
			res, err := Plan(context.Background(), Request{RepoDir: repo, Apps: []Application{tc.app},
				Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, Change: Change{Replicas: &Replicas{Count: 4}}})
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, e := range res.Edits {
				paths = append(paths, e.Path)
			}
			if !reflect.DeepEqual(paths, tc.want) {
				t.Errorf("edited %v, want %v", paths, tc.want)
			}
			if !strings.Contains(res.GitDiff, "+++ b/"+tc.want[0]) {
				t.Errorf("git diff does not name %s:\n%s", tc.want[0], res.GitDiff)
			}
		})
	}
}

// TestAffectedByAnyNameOfAFile asks which apps a file affects under each of its
// names: the answer is the same, and holds every app that reads it.
func TestAffectedByAnyNameOfAFile(t *testing.T) {
	repo := writeSymlinkedBaseRepo(t)
	apps := []Application{baseApp, dirLinkedApp, fileLinkedApp, pathLinkedApp, chartApp}
	p, err := newPlanner(context.Background(), Request{RepoDir: repo, Apps: apps, App: baseApp.Name,
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, Change: Change{Replicas: &Replicas{Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		names []string
		want  []string
	}{
		"shared deployment": {
			names: []string{"bases/web/deployment.yaml", "apps/dir-linked/base/deployment.yaml", "apps/file-linked/deployment.yaml", "apps/path-linked/deployment.yaml"},
			want:  []string{"base", "chart", "dir-linked", "file-linked", "path-linked"},
		},
		"base of the linked base": {
			names: []string{"shared/common/cm.yaml"},
			want:  []string{"base", "dir-linked", "path-linked"},
		},
		"file only one app reads": {
			names: []string{"apps/file-linked/service.yaml"},
			want:  []string{"base", "file-linked"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, f := range tc.names {
				affected, _ := p.affected([]string{f})
				var got []string
				for _, a := range affected {
					got = append(got, a.Name)
				}
				slices.Sort(got)
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("affected by %s = %v, want %v", f, got, tc.want)
				}
			}
		})
	}
}

// TestViewOverlayIsSeenUnderEveryName replaces a file under one name and reads it
// under the others.
func TestViewOverlayIsSeenUnderEveryName(t *testing.T) {
	repo := writeSymlinkedBaseRepo(t)
	tr, err := openTree(repo)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"bases/web/deployment.yaml", "apps/dir-linked/base/deployment.yaml", "apps/file-linked/deployment.yaml", "apps/path-linked/deployment.yaml"}
	for _, edited := range names {
		v := newView(tr, map[string][]byte{edited: []byte("edited")})
		for _, n := range names {
			if got, err := v.ReadFile("/" + n); err != nil || string(got) != "edited" {
				t.Errorf("edited as %s, read as %s: %q, %v", edited, n, got, err)
			}
		}
	}
	d, f, err := newView(tr, nil).CleanedAbs("/apps/dir-linked/base/deployment.yaml")
	if err != nil || d != "/bases/web" || f != "deployment.yaml" {
		t.Errorf("CleanedAbs through a directory symlink = %q %q %v, want the real path as kustomize on disk", d, f, err)
	}
}

// TestRenderAndPlanAgreeThroughSymlinks: the render-only entry point and the
// planner's before-render give the same objects and the same (real) origins.
func TestRenderAndPlanAgreeThroughSymlinks(t *testing.T) {
	repo := writeSymlinkedBaseRepo(t)
	for _, app := range []Application{baseApp, dirLinkedApp, fileLinkedApp, pathLinkedApp} {
		t.Run(app.Name, func(t *testing.T) {
			objs, err := Render(context.Background(), repo, app)
			if err != nil {
				t.Fatal(err)
			}
			p, err := newPlanner(context.Background(), Request{RepoDir: repo, Apps: []Application{app},
				Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, Change: Change{Replicas: &Replicas{Count: 1}}})
			if err != nil {
				t.Fatal(err)
			}
			internal, err := p.render(p.before, app)
			if err != nil {
				t.Fatal(err)
			}
			if want := exportObjects(internal); !reflect.DeepEqual(objs, want) {
				t.Fatalf("Render differs from the planner's before-render:\n%+v\n%+v", objs, want)
			}
			for _, o := range objs {
				if o.Manifest["kind"] != "Deployment" {
					continue
				}
				if where := o.Origin + o.File; where != "bases/web/deployment.yaml" {
					t.Errorf("Deployment comes from %q, want the real file bases/web/deployment.yaml", where)
				}
			}
		})
	}
}

// TestCreatedFileIsNeverWrittenThroughASymlink: a new file never takes a name held
// by a dangling symlink, as writing it would follow the link.
func TestCreatedFileIsNeverWrittenThroughASymlink(t *testing.T) {
	repo := testtree.Write(t, map[string]string{"apps/web/deployment.yaml": twoContainerDeployment})
	writeLinks(t, repo, map[string]string{"apps/web/configmap-extra.yaml": "../../../outside.yaml"})
	res, err := Plan(context.Background(), Request{RepoDir: repo,
		Apps:   []Application{{Name: "web", Path: "apps/web", SourceType: SourceDirectory, Namespace: "web"}},
		Change: Change{NewResource: &NewResource{Manifest: configMap("extra")}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Edits {
		if e.Path == "apps/web/configmap-extra.yaml" {
			t.Errorf("created %s, the name of a dangling symlink", e.Path)
		}
	}
}

// TestSymlinkCycleIsRefusedWithAReason plans over a repository holding a cycle of
// symlinks (git stores one as readily as any link): whatever reads it, a Directory
// app listing it, a kustomization naming it or a chart holding it, the plan is
// refused naming the link, not failed as an error of the service.
func TestSymlinkCycleIsRefusedWithAReason(t *testing.T) {
	cases := map[string]struct {
		files map[string]string
		app   Application
	}{
		"directory app": {
			files: map[string]string{"app/deployment.yaml": twoContainerDeployment},
			app:   Application{Name: "web", Path: "app", SourceType: SourceDirectory, Namespace: "web"},
		},
		"kustomize resource": {
			files: map[string]string{"app/deployment.yaml": twoContainerDeployment, "app/kustomization.yaml": "resources:\n- deployment.yaml\n- a.yaml\n"},
			app:   Application{Name: "web", Path: "app", SourceType: SourceKustomize, Namespace: "web"},
		},
		"helm chart": {
			files: map[string]string{"app/Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n", "app/templates/deployment.yaml": twoContainerDeployment},
			app:   Application{Name: "web", Path: "app", SourceType: SourceHelm, Namespace: "web"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			repo := testtree.Write(t, tc.files)
			writeLinks(t, repo, map[string]string{"app/a.yaml": "b.yaml", "app/b.yaml": "a.yaml"})
			_, err := Plan(context.Background(), Request{RepoDir: repo, Apps: []Application{tc.app}, App: "web",
				Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				Change: Change{Replicas: &Replicas{Count: 3}}})
			var ref *Refusal
			if !errors.As(err, &ref) {
				t.Fatalf("err = %v, want a refusal", err)
			}
			const want = "app/a.yaml is a symlink that does not resolve (a cycle of symlinks, or more than the system follows)"
			if ref.Code != CodeRenderFailed || !strings.Contains(ref.Reason, want) {
				t.Fatalf("refused (%s): %s\nwant (%s) with: %s", ref.Code, ref.Reason, CodeRenderFailed, want)
			}
		})
	}
}

// TestSymlinkThroughAFileNamesNothing plans a Directory app holding a symlink into
// a path through a regular file: like a dangling link it names no file, and the
// plan goes on without it.
func TestSymlinkThroughAFileNamesNothing(t *testing.T) {
	repo := testtree.Write(t, map[string]string{"app/deployment.yaml": twoContainerDeployment})
	writeLinks(t, repo, map[string]string{"app/c.yaml": "deployment.yaml/x"})
	res, err := Plan(context.Background(), Request{RepoDir: repo,
		Apps: []Application{{Name: "web", Path: "app", SourceType: SourceDirectory, Namespace: "web"}}, App: "web",
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		Change: Change{Replicas: &Replicas{Count: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Edits) != 1 || res.Edits[0].Path != "app/deployment.yaml" {
		t.Fatalf("edits %+v, want one of app/deployment.yaml", res.Edits)
	}
}

// TestPathLongerThanTheSystemAllowsIsRefused plans a Directory app that recurses
// into folders nested past the longest path the system opens (git has no such
// limit: a few folders of long names suffice): refused naming the bound, not
// failed with the system's error, which names the path on this machine.
func TestPathLongerThanTheSystemAllowsIsRefused(t *testing.T) {
	repo := testtree.Write(t, map[string]string{"app/deployment.yaml": twoContainerDeployment})
	root, err := os.OpenRoot(repo)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	deep := "app"
	for range 20 {
		deep += "/" + strings.Repeat("d", 240)
	}
	if err := root.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := root.WriteFile(deep+"/cm.yaml", []byte(configMap("deep")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Plan(context.Background(), Request{RepoDir: repo,
		Apps: []Application{{Name: "web", Path: "app", SourceType: SourceDirectory, Namespace: "web", Directory: DirectoryOptions{Recurse: true}}}, App: "web",
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		Change: Change{Replicas: &Replicas{Count: 3}}})
	var ref *Refusal
	if !errors.As(err, &ref) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if ref.Code != CodeTooLarge || !strings.Contains(ref.Reason, "the path is longer than the file system allows") || strings.Contains(ref.Reason, repo) {
		t.Fatalf("refused (%s): %s\nwant (%s) saying the path is too long, without the repository's place on disk", ref.Code, ref.Reason, CodeTooLarge)
	}
}
