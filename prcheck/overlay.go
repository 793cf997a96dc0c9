package prcheck

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/render"
)

// maxOverlayFiles is the most changed files a head's tree is built from the base's
// for: each costs a blob read, while the head's archive costs one download of the
// whole repository, which in a monorepo is most of a check's time.
const maxOverlayFiles = 20

// Blobs reads single blobs and the modes of files; github.Repos implements it. A
// GitHub without it gets every head as an archive.
type Blobs interface {
	Blob(ctx context.Context, inst int64, repo, sha string, maxBytes int) ([]byte, error)
	FileModes(ctx context.Context, inst int64, repo, commit string, paths []string) (map[string]string, error)
}

// headTree opens the head's tree: the base's (the merge base's, which with the
// comparison's files is exactly the head's) with the changed files written over
// it, or the head's archive when the change is large or not fully listed. Release
// removes what it built.
func (c *Checker) headTree(ctx context.Context, h Head, baseDir string, cmp github.Comparison) (dir string, release func(), err error) {
	if blobs, ok := c.GitHub.(Blobs); ok && cmp.Complete && len(cmp.Files) <= maxOverlayFiles {
		dir, release, err := overlay(ctx, blobs, h, baseDir, cmp)
		if err == nil || ctx.Err() != nil {
			return dir, release, err
		}
		// A tree on another filesystem cannot be linked, a blob may be over the
		// limit: the archive still serves.
		zerolog.Ctx(ctx).Debug().Err(err).Str("head", h.HeadSHA).Msg("Head tree not built from the base; downloading it")
	}
	snap, err := c.GitHub.Snapshot(ctx, h.InstallationID, h.Repo, h.HeadSHA)
	if err != nil {
		return "", nil, err
	}
	return snap.Dir, snap.Release, nil
}

// overlay builds the head's tree from the base's and the changed files' blobs.
func overlay(ctx context.Context, blobs Blobs, h Head, baseDir string, cmp github.Comparison) (dir string, release func(), err error) {
	tmp, err := os.MkdirTemp("", "kukie-head-")
	if err != nil {
		return "", nil, fmt.Errorf("head tree: %w", err)
	}
	release = func() { _ = os.RemoveAll(tmp) }
	dir = filepath.Join(tmp, "tree")
	if err := linkTree(baseDir, dir); err != nil {
		release()
		return "", nil, fmt.Errorf("head tree: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		release()
		return "", nil, fmt.Errorf("head tree: %w", err)
	}
	defer root.Close()
	if err := regularFiles(ctx, blobs, h, cmp); err != nil {
		release()
		return "", nil, err
	}
	for _, f := range cmp.Files {
		if err := overlayFile(ctx, blobs, root, h, f); err != nil {
			release()
			return "", nil, err
		}
	}
	return dir, release, nil
}

// regularFiles checks that every file the head changes is a regular file there. A
// comparison does not say a file is a symbolic link, whose blob is its target:
// written as a file, it would hide from the check what the link deploys. The
// head's archive makes links as Argo CD's checkout does.
func regularFiles(ctx context.Context, blobs Blobs, h Head, cmp github.Comparison) error {
	var paths []string
	for _, f := range cmp.Files {
		if f.Status != "removed" {
			paths = append(paths, f.Path)
		}
	}
	if len(paths) == 0 {
		return nil
	}
	modes, err := blobs.FileModes(ctx, h.InstallationID, h.Repo, h.HeadSHA, paths)
	if err != nil {
		return fmt.Errorf("head tree: %w", err)
	}
	for _, p := range paths {
		switch m := modes[p]; m {
		case github.ModeFile, github.ModeExecutable:
		default:
			return fmt.Errorf("head tree: %s has git mode %q, not a regular file's", p, m)
		}
	}
	return nil
}

// overlayFile writes one changed file of the head over the base's, never through
// the base's own file (its link is removed first) and never outside the tree.
func overlayFile(ctx context.Context, blobs Blobs, root *os.Root, h Head, f github.ChangedFile) error {
	if f.PreviousPath != "" {
		if err := root.Remove(f.PreviousPath); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("head tree: remove %s: %w", f.PreviousPath, err)
		}
	}
	if err := root.Remove(f.Path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("head tree: remove %s: %w", f.Path, err)
	}
	if f.Status == "removed" {
		return nil
	}
	data, err := blobs.Blob(ctx, h.InstallationID, h.Repo, f.BlobSHA, render.MaxFileSize)
	if err != nil {
		return fmt.Errorf("head tree: %s: %w", f.Path, err)
	}
	if err := root.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
		return fmt.Errorf("head tree: %w", err)
	}
	if err := root.WriteFile(f.Path, data, 0o644); err != nil {
		return fmt.Errorf("head tree: write %s: %w", f.Path, err)
	}
	return nil
}

// linkTree makes dst a copy of the tree at src made of hard links (symbolic links
// copied as links), so no file's content is copied.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		default:
			return os.Link(p, to)
		}
	})
}
