// Package checkout writes verified edits into a repository checkout on disk, for the
// offline plan command's --write: every file is checked against what was planned
// before any is written, and each is replaced whole (a complete temporary file
// renamed over it) or removed, so an interrupted or refused write leaves no file
// half written.
//
// It only writes what it is handed: it never plans, renders or verifies (package
// render does), and never touches a Git repository's history.
package checkout

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kukie/kukie-gitops/render"
)

// WriteEdits applies verified edits to the checkout in dir. Every file is checked before any is written,
// so a file that changed since planning leaves the whole repository untouched.
func WriteEdits(dir string, edits []render.FileEdit) error {
	modes := make([]os.FileMode, len(edits))
	for i, e := range edits {
		full := filepath.Join(dir, filepath.FromSlash(e.Path))
		modes[i] = 0o644
		current, err := os.ReadFile(full)
		switch {
		case e.Created && err == nil:
			return fmt.Errorf("write %s: the file appeared since planning; nothing written", e.Path)
		case e.Created && !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("write %s: %w", e.Path, err)
		case !e.Created && err != nil:
			return fmt.Errorf("write %s: %w", e.Path, err)
		case !e.Created && !bytes.Equal(current, e.Old):
			return fmt.Errorf("write %s: the file changed since planning; nothing written", e.Path)
		}
		if info, err := os.Stat(full); err == nil {
			modes[i] = info.Mode().Perm()
		}
	}
	for i, e := range edits {
		if e.New == nil && !e.Created {
			// The edit removes the file.
			if err := os.Remove(filepath.Join(dir, filepath.FromSlash(e.Path))); err != nil {
				return fmt.Errorf("remove %s: %w", e.Path, err)
			}
			continue
		}
		if err := writeFileAtomic(filepath.Join(dir, filepath.FromSlash(e.Path)), e.New, modes[i]); err != nil {
			return fmt.Errorf("write %s: %w", e.Path, err)
		}
	}
	return nil
}

// writeFileAtomic replaces a file by renaming a complete temporary file over it.
func writeFileAtomic(full string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(full), ".kukie-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), mode)); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), full); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
