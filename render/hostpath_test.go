package render

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFSErrorsNameNoHostPath: a file system error of a repository read names the
// repository path and the system's error, never where the repository lies on this
// host, and is still the system's error for errors.Is.
func TestFSErrorsNameNoHostPath(t *testing.T) {
	dir := t.TempDir()
	_, err := os.Open(filepath.Join(dir, "apps", "web", "missing.yaml"))
	if err == nil {
		t.Fatal("opening a missing file worked")
	}
	got := fsError("read", "apps/web/missing.yaml", err)
	if strings.Contains(got.Error(), dir) {
		t.Errorf("error %q names the repository's folder %s", got, dir)
	}
	if want := "read apps/web/missing.yaml: open: no such file or directory"; got.Error() != want {
		t.Errorf("error %q, want %q", got, want)
	}
	if !errors.Is(got, fs.ErrNotExist) {
		t.Errorf("error %q is not fs.ErrNotExist", got)
	}
}
