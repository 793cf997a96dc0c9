package render

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
)

func TestViewOverlaysTheTree(t *testing.T) {
	repo := testtree.Write(t, map[string]string{
		"a/x.yaml":   "x",
		"a/b/y.yaml": "y",
	})
	tr, err := openTree(repo)
	if err != nil {
		t.Fatal(err)
	}
	v := newView(tr, map[string][]byte{"a/x.yaml": []byte("edited"), "a/new/z.yaml": []byte("z")})

	if got, _ := v.ReadFile("/a/x.yaml"); string(got) != "edited" {
		t.Errorf("ReadFile of a replaced file = %q", got)
	}
	if got, _ := v.ReadFile("a/b/y.yaml"); string(got) != "y" {
		t.Errorf("ReadFile of a tree file = %q", got)
	}
	names, err := v.ReadDir("/a")
	if err != nil || !reflect.DeepEqual(names, []string{"b", "new", "x.yaml"}) {
		t.Errorf("ReadDir = %v, %v", names, err)
	}
	if !v.IsDir("/a/new") || v.IsDir("/a/x.yaml") || !v.Exists("/a/new/z.yaml") || v.Exists("/a/missing") {
		t.Error("IsDir/Exists disagree with the view")
	}
	d, f, err := v.CleanedAbs("/a/b/../x.yaml")
	if err != nil || d != "/a" || f != "x.yaml" {
		t.Errorf("CleanedAbs = %q %q %v", d, f, err)
	}
	if d, f, _ := v.CleanedAbs("/../../a"); d != "/a" || f != "" {
		t.Errorf("CleanedAbs cannot climb above the root: %q %q", d, f)
	}
	matches, err := v.Glob("/a/*.yaml")
	if err != nil || !reflect.DeepEqual(matches, []string{"/a/x.yaml"}) {
		t.Errorf("Glob = %v, %v", matches, err)
	}
	var walked []string
	if err := v.Walk("/a", func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			walked = append(walked, p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(walked, []string{"/a/b/y.yaml", "/a/new/z.yaml", "/a/x.yaml"}) {
		t.Errorf("Walk = %v", walked)
	}
	if err := v.WriteFile("/a/x.yaml", []byte("again")); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(repo, "a/x.yaml")); string(data) != "x" {
		t.Errorf("a view write reached the repository: %q", data)
	}
	if _, err := v.Create("/a/c"); err == nil {
		t.Error("Create on the read-only view succeeded")
	}
}

func TestJoinRelRefusesEscapes(t *testing.T) {
	cases := map[string]struct {
		dir, ref string
		want     string
		ok       bool
	}{
		"sibling":        {"overlays/prod", "../../bases/web", "bases/web", true},
		"same dir":       {"overlays/prod", "./patch.yaml", "overlays/prod/patch.yaml", true},
		"escape":         {"overlays/prod", "../../../etc", "", false},
		"absolute":       {"overlays/prod", "/etc/passwd", "", false},
		"root relative":  {".", "apps", "apps", true},
		"escape at root": {".", "..", "", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := joinRel(tc.dir, tc.ref)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("joinRel(%q, %q) = %q, %v", tc.dir, tc.ref, got, err)
			}
		})
	}
}

func TestParseImageRef(t *testing.T) {
	cases := map[string]imageRef{
		"nginx":                              {name: "nginx"},
		"nginx:1.27":                         {name: "nginx", tag: "1.27"},
		"localhost:5000/team/app:v2":         {name: "localhost:5000/team/app", tag: "v2"},
		"ghcr.io/x/app@sha256:abc":           {name: "ghcr.io/x/app", digest: "sha256:abc"},
		"ghcr.io/x/app:1.0@sha256:abc":       {name: "ghcr.io/x/app", tag: "1.0", digest: "sha256:abc"},
		"registry:5000/app":                  {name: "registry:5000/app"},
		"docker.io/library/redis:7.2-alpine": {name: "docker.io/library/redis", tag: "7.2-alpine"},
	}
	for in, want := range cases {
		t.Run(in, func(t *testing.T) {
			got := parseImageRef(in)
			if got != want {
				t.Fatalf("parseImageRef(%q) = %+v, want %+v", in, got, want)
			}
			if got.String() != in {
				t.Fatalf("String() = %q, want %q", got.String(), in)
			}
		})
	}
}

func TestDirectoryMatcher(t *testing.T) {
	cases := map[string]struct {
		opts DirectoryOptions
		file string
		want bool
	}{
		"top-level yaml":           {DirectoryOptions{}, "apps/web/a.yaml", true},
		"json":                     {DirectoryOptions{}, "apps/web/a.json", true},
		"other extension":          {DirectoryOptions{}, "apps/web/README.md", false},
		"subdir without recurse":   {DirectoryOptions{}, "apps/web/sub/a.yaml", false},
		"subdir with recurse":      {DirectoryOptions{Recurse: true}, "apps/web/sub/a.yaml", true},
		"outside the path":         {DirectoryOptions{Recurse: true}, "apps/webx/a.yaml", false},
		"excluded":                 {DirectoryOptions{Recurse: true, Exclude: "sub/*"}, "apps/web/sub/a.yaml", false},
		"include alternatives hit": {DirectoryOptions{Recurse: true, Include: "{a.yaml,sub/*}"}, "apps/web/sub/b.yaml", true},
		"include misses":           {DirectoryOptions{Include: "*.yml"}, "apps/web/a.yaml", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := newDirectoryMatcher(Application{Name: "web", Path: "apps/web", Directory: tc.opts})
			if err != nil {
				t.Fatal(err)
			}
			if got := m.matches(tc.file); got != tc.want {
				t.Fatalf("matches(%q) = %v, want %v", tc.file, got, tc.want)
			}
		})
	}
}

func TestGeneratePathsCover(t *testing.T) {
	app := Application{Name: "web", Path: "overlays/prod", ManifestGeneratePaths: ".; /bases/web ;"}
	cases := map[string]struct{ covered, annotated bool }{
		"overlays/prod/kustomization.yaml": {true, true},
		"bases/web/deployment.yaml":        {true, true},
		"overlays/staging/x.yaml":          {false, true},
	}
	for f, want := range cases {
		c, a := generatePathsCover(app, f)
		if c != want.covered || a != want.annotated {
			t.Errorf("generatePathsCover(%q) = %v %v, want %v %v", f, c, a, want.covered, want.annotated)
		}
	}
	if _, a := generatePathsCover(Application{Path: "x"}, "x/y"); a {
		t.Error("an app without the annotation counts as annotated")
	}
}
