package moduleroot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindWalksUpToTheNearestGoMod(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{root, filepath.Join(root, "a")} {
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(deep)
	got, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.EvalSymlinks(filepath.Join(root, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if gotReal, _ := filepath.EvalSymlinks(got); gotReal != want {
		t.Errorf("Find() = %s, want the nearest module %s", got, want)
	}
}

func TestFindWithoutGoModIsAnError(t *testing.T) {
	// The temporary directory lies outside any module.
	t.Chdir(t.TempDir())
	got, err := Find()
	if err == nil || !strings.Contains(err.Error(), "no go.mod") {
		t.Fatalf("Find() = %q, %v; want an error saying no go.mod was found", got, err)
	}
}

func TestFindFromThisPackageIsTheModuleOfThisRepository(t *testing.T) {
	root, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "module github.com/kukie/kukie-gitops\n") {
		t.Errorf("Find() = %s, whose go.mod is not this module's", root)
	}
}
