package githubtest

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
)

func TestTarballIsARealArchiveBehindARedirect(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{
		"README.md":                "# deploy\n",
		"apps/web/deployment.yaml": "replicas: 1\n",
	})
	s.PushCommit(t, "acme/deploy", "main", map[string]string{"apps/web/deployment.yaml": "replicas: 2\n"}, DefaultAuthor)
	head := s.Head(t, "acme/deploy", "main")

	link, resp, err := c.Repositories.GetArchiveLink(ctx, "acme", "deploy", github.Tarball, &github.RepositoryContentGetOptions{Ref: "main"}, 0)
	if err != nil {
		t.Fatalf("archive link: %v", err)
	}
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status = %d, want 302", resp.StatusCode)
	}
	files, pax := readTarball(t, s, link.String())
	prefix := "acme-deploy-" + head[:7] + "/"
	want := map[string]string{
		prefix:                              "",
		prefix + "README.md":                "# deploy\n",
		prefix + "apps/":                    "",
		prefix + "apps/web/":                "",
		prefix + "apps/web/deployment.yaml": "replicas: 2\n",
	}
	for name, content := range want {
		got, ok := files[name]
		if !ok {
			t.Errorf("archive lacks %s (has %v)", name, files)
			continue
		}
		if got != content {
			t.Errorf("%s = %q, want %q", name, got, content)
		}
	}
	if len(files) != len(want) {
		t.Errorf("archive has %d entries, want %d: %v", len(files), len(want), files)
	}
	if pax != head {
		t.Errorf("pax comment = %q, want the commit %s", pax, head)
	}
	if n := s.TarballDownloads("acme/deploy"); n != 1 {
		t.Errorf("downloads = %d, want 1", n)
	}

	// An older commit by SHA: the archive holds that tree.
	first := s.PushCommit(t, "acme/deploy", "main", map[string]string{"x": "y"}, DefaultAuthor)
	old, _, err := c.Repositories.GetArchiveLink(ctx, "acme", "deploy", github.Tarball, &github.RepositoryContentGetOptions{Ref: head}, 0)
	if err != nil {
		t.Fatal(err)
	}
	files, _ = readTarball(t, s, old.String())
	if _, ok := files[prefix+"x"]; ok || first == head {
		t.Errorf("archive at %s contains a later file", head)
	}
	if n := s.TarballDownloads("acme/deploy"); n != 2 {
		t.Errorf("downloads = %d, want 2", n)
	}

	// Links are short-lived.
	s.Clock().Advance(6 * time.Minute)
	resp2, err := s.Client().Get(link.String())
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusForbidden {
		t.Errorf("expired link status = %d, want 403", resp2.StatusCode)
	}

	_, resp, _ = c.Repositories.GetArchiveLink(ctx, "acme", "deploy", github.Tarball, &github.RepositoryContentGetOptions{Ref: "no-such-ref"}, 0)
	if resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown ref should be 404, got %v", resp)
	}
}

func readTarball(t *testing.T, s *Server, url string) (map[string]string, string) {
	t.Helper()
	resp, err := s.Client().Get(url)
	if err != nil {
		t.Fatalf("download %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("download status %d", resp.StatusCode)
	}
	gz, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	pax := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("tar: %v", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			pax = h.PAXRecords["comment"]
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", h.Name, err)
		}
		files[h.Name] = string(b)
	}
	return files, pax
}
