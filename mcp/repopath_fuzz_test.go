package mcp

import (
	"io/fs"
	"strings"
	"testing"
)

// FuzzRepoPath reads any path a model asks list_repo_files or read_repo_file
// for: what it takes is a path inside the repository (no "..", no leading
// slash), cleaned once and for all, and what it refuses it refuses with
// invalid_request.
func FuzzRepoPath(f *testing.F) {
	for _, seed := range []string{"", ".", "/", "apps/web/kustomization.yaml", "../../etc/passwd", "/apps/../..//x",
		" apps/web ", "a/./b/", "a\\..\\b", "a\x00b", "\u00e9/\u2028", "..."} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := repoPath(p)
		if err != nil {
			if got != "" || !strings.HasPrefix(err.Error(), "invalid_request: ") {
				t.Fatalf("%q refused as %q: %v", p, got, err)
			}
			return
		}
		if !fs.ValidPath(got) {
			t.Fatalf("%q taken as %q, no path inside the repository", p, got)
		}
		if again, err := repoPath(got); err != nil || again != got {
			t.Fatalf("%q taken as %q, then as %q (%v)", p, got, again, err)
		}
	})
}
