package render

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// A changed multi-line string (an Application's helm values) is shown in the
// cluster diff on one line, quoted, as every field change is.
func TestClusterDiffShowsAMultiLineStringOnOneLine(t *testing.T) {
	dir := filepath.Join(goldenRoot, "helm-app-values-string-annotation")
	req := readGoldenRequest(t, dir)
	repo := filepath.Join(t.TempDir(), "repo")
	copyTree(t, filepath.Join(dir, "input"), repo)
	res, err := Plan(context.Background(), Request{RepoDir: repo, Apps: req.Apps, App: req.App, Target: req.Target, Change: req.Change})
	if err != nil {
		t.Fatal(err)
	}
	var seen bool
	for _, d := range res.ClusterDiff {
		for _, c := range d.Changes {
			if c.Path != "spec.source.helm.values" {
				continue
			}
			seen = true
			want := `"# qa sizing\npodAnnotations:\n  team: core\n  owner: bob\n"`
			if c.After != want || strings.ContainsAny(c.Before, "\n") {
				t.Fatalf("change %s: %s -> %s, want it on one line, after %s", c.Path, c.Before, c.After, want)
			}
		}
	}
	if !seen {
		t.Fatalf("no change of spec.source.helm.values in %+v", res.ClusterDiff)
	}
}
