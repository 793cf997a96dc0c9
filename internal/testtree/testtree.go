// Package testtree writes file trees for tests: a repository's files as a map of
// slash-separated relative paths to contents.
package testtree

import (
	"os"
	"path/filepath"
	"testing"
)

// Write writes files (relative path → content) into a new temporary directory,
// removed when the test ends, and returns the directory.
func Write(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}
