package githubtest

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// archiveLinkLifetime is how long a codeload link from the tarball redirect works.
const archiveLinkLifetime = 5 * time.Minute

// archiveLink is a short-lived, self-authorizing download URL, as codeload's ?token=.
type archiveLink struct {
	repo      *repo
	sha       string
	expiresAt time.Time
}

func (s *Server) archiveRoutes() []route {
	return []route{
		{pattern: "GET /repos/{owner}/{repo}/tarball", doc: "/repos/contents#download-a-repository-archive-tar", handler: s.onRepo(readContents, s.handleTarball)},
		{pattern: "GET /repos/{owner}/{repo}/tarball/{ref...}", doc: "/repos/contents#download-a-repository-archive-tar", handler: s.onRepo(readContents, s.handleTarball)},
		{pattern: "GET /_codeload/{owner}/{repo}/legacy.tar.gz/{ref...}", doc: "/repos/contents#download-a-repository-archive-tar", handler: s.handleCodeload},
	}
}

// handleTarball answers like GitHub: 302 to a codeload URL that serves the archive.
func (s *Server) handleTarball(w http.ResponseWriter, r *http.Request, rp *repo) {
	c, err := rp.resolveCommit(r.PathValue("ref"))
	if err != nil {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return
	}
	token, err := randomAlnum(24)
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	s.archives[token] = &archiveLink{repo: rp, sha: c.Hash.String(), expiresAt: s.clock.Now().Add(archiveLinkLifetime)}
	w.Header().Set("Location", s.htmlURL("_codeload/%s/legacy.tar.gz/%s?token=%s", rp.fullName(), c.Hash, token))
	w.WriteHeader(http.StatusFound)
}

func (s *Server) handleCodeload(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.repoFromPath(r)
	link := s.archives[r.URL.Query().Get("token")]
	switch {
	case rp == nil:
		http.NotFound(w, r)
		return
	case link == nil && rp.private, link != nil && link.repo != rp:
		http.NotFound(w, r)
		return
	case link != nil && !s.clock.Now().Before(link.expiresAt):
		http.Error(w, "token expired", http.StatusForbidden)
		return
	}
	c, err := rp.resolveCommit(r.PathValue("ref"))
	if err != nil || (link != nil && c.Hash.String() != link.sha) {
		http.NotFound(w, r)
		return
	}
	rp.tarballDownloads++
	prefix := fmt.Sprintf("%s-%s-%s", rp.owner.login, rp.name, c.Hash.String()[:7])
	w.Header().Set("Content-Type", "application/x-gzip")
	w.Header().Set("Content-Disposition", "attachment; filename="+prefix+".tar.gz")
	w.WriteHeader(http.StatusOK)
	// The status is sent: a failure now can only cut the stream short, which the
	// client sees as a corrupt archive, as with a dropped connection on GitHub.
	_ = rp.writeTarball(w, c, prefix+"/")
}

// writeTarball writes the tree of commit c as git archive does: a pax global header
// carrying the commit id, then every entry under prefix, with the commit's time.
func (rp *repo) writeTarball(w io.Writer, c *object.Commit, prefix string) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	mtime := c.Committer.When
	if err := tw.WriteHeader(&tar.Header{
		Typeflag:   tar.TypeXGlobalHeader,
		Name:       "pax_global_header",
		PAXRecords: map[string]string{"comment": c.Hash.String()},
	}); err != nil {
		return fmt.Errorf("write pax header: %w", err)
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: prefix, Mode: 0o775, ModTime: mtime}); err != nil {
		return fmt.Errorf("write %s: %w", prefix, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return fmt.Errorf("read tree of %s: %w", c.Hash, err)
	}
	if err := rp.writeTarTree(tw, tree, prefix, mtime); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close tar: %w", err)
	}
	return gz.Close()
}

func (rp *repo) writeTarTree(tw *tar.Writer, tree *object.Tree, prefix string, mtime time.Time) error {
	for _, e := range tree.Entries {
		name := prefix + e.Name
		switch e.Mode {
		case filemode.Dir:
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o775, ModTime: mtime}); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
			sub, err := object.GetTree(rp.storer(), e.Hash)
			if err != nil {
				return fmt.Errorf("read tree %s: %w", name, err)
			}
			if err := rp.writeTarTree(tw, sub, name+"/", mtime); err != nil {
				return err
			}
		case filemode.Submodule:
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o775, ModTime: mtime}); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
		case filemode.Symlink:
			target, err := rp.readBlob(e.Hash)
			if err != nil {
				return fmt.Errorf("read %s: %w", name, err)
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: string(target), Mode: 0o777, ModTime: mtime}); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
		default:
			data, err := rp.readBlob(e.Hash)
			if err != nil {
				return fmt.Errorf("read %s: %w", name, err)
			}
			mode := int64(0o664)
			if e.Mode == filemode.Executable {
				mode = 0o775
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: mode, ModTime: mtime}); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
			if _, err := tw.Write(data); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
		}
	}
	return nil
}
