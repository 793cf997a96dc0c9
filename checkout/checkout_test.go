package checkout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/render"
)

func TestWriteEditsChecksEveryFileFirst(t *testing.T) {
	repo := t.TempDir()
	for name, content := range map[string]string{"a.yaml": "a: 1\n", "b.yaml": "b: 1\n"} {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edits := []render.FileEdit{
		{Path: "a.yaml", Old: []byte("a: 1\n"), New: []byte("a: 2\n")},
		{Path: "b.yaml", Old: []byte("b: 0\n"), New: []byte("b: 2\n")}, // changed since planning
		{Path: "c.yaml", New: []byte("c: 1\n"), Created: true},
	}
	err := WriteEdits(repo, edits)
	if err == nil || !strings.Contains(err.Error(), "b.yaml: the file changed since planning") {
		t.Fatalf("want a refusal naming b.yaml, got %v", err)
	}
	if a, _ := os.ReadFile(filepath.Join(repo, "a.yaml")); string(a) != "a: 1\n" {
		t.Fatalf("a.yaml was written although b.yaml refused: %q", a)
	}
	if _, err := os.Stat(filepath.Join(repo, "c.yaml")); !os.IsNotExist(err) {
		t.Fatalf("c.yaml was created although b.yaml refused: %v", err)
	}
}

func TestWriteEditsRemovesARemovedFile(t *testing.T) {
	repo := t.TempDir()
	for name, content := range map[string]string{"kustomization.yaml": "resources:\n- a.yaml\n- b.yaml\n", "b.yaml": "b: 1\n"} {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edits := []render.FileEdit{
		{Path: "kustomization.yaml", Old: []byte("resources:\n- a.yaml\n- b.yaml\n"), New: []byte("resources:\n- a.yaml\n")},
		{Path: "b.yaml", Old: []byte("b: 1\n")}, // removed
	}
	if err := WriteEdits(repo, edits); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repo, "b.yaml")); !os.IsNotExist(err) {
		t.Fatalf("b.yaml is still there (%v)", err)
	}
	if k, _ := os.ReadFile(filepath.Join(repo, "kustomization.yaml")); string(k) != "resources:\n- a.yaml\n" {
		t.Fatalf("kustomization.yaml = %q", k)
	}
}
