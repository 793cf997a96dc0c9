package github_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
)

func installationClient(t *testing.T, s *githubtest.Server, files map[string]string) *gh.Client {
	t.Helper()
	s.CreateRepo(t, "acme", "deploy", files, "main")
	id := s.CreateInstallation(t, "acme", "deploy")
	c := gh.NewClient(s.Client()).WithAuthToken(s.InstallationToken(t, id, nil, nil).Reveal())
	c, err := c.WithEnterpriseURLs(s.URL(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestArchiveCacheDownloadsOncePerCommit(t *testing.T) {
	s := githubtest.New(t)
	c := installationClient(t, s, map[string]string{"apps/web/deploy.yaml": "kind: Deployment\n", "README.md": "hi\n"})
	ctx := context.Background()
	sha := s.Head(t, "acme/deploy", "main")
	cache, err := github.NewArchiveCache(t.TempDir(), 64<<20, github.DefaultArchiveLimits)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			snap, err := cache.Get(ctx, "acme/deploy", sha, github.TarballFetcher(c, "acme", "deploy", sha))
			if err != nil {
				t.Error(err)
				return
			}
			defer snap.Release()
			b, err := os.ReadFile(filepath.Join(snap.Dir, "apps/web/deploy.yaml"))
			if err != nil || string(b) != "kind: Deployment\n" {
				t.Errorf("extracted file: %q %v", b, err)
			}
		}()
	}
	wg.Wait()
	if n := s.TarballDownloads("acme/deploy"); n != 1 {
		t.Fatalf("%d tarball downloads for one commit, want 1", n)
	}
	snap, err := cache.Get(ctx, "acme/deploy", sha, func(context.Context) (io.ReadCloser, error) {
		return nil, errors.New("must not download again")
	})
	if err != nil {
		t.Fatal(err)
	}
	snap.Release()
	// The eight racing lookups missed (one downloaded, the rest waited on it) unless
	// one came after the download; the last one was a hit.
	if st := cache.Stats(); st.Hits+st.Misses != 9 || st.Misses == 0 || st.Hits == 0 {
		t.Fatalf("stats %+v, want 9 lookups, the first a miss and the last a hit", st)
	}
}

func tarball(t *testing.T, entries []tar.Header, contents map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range entries {
		body := contents[h.Name]
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExtractTarballConfinesAndLimits(t *testing.T) {
	reg := func(name string) tar.Header { return tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644} }
	link := func(name, target string) tar.Header {
		return tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target}
	}
	limits := github.ArchiveLimits{MaxFileBytes: 10, MaxTotalBytes: 15, MaxFiles: 5}
	tests := map[string]struct {
		entries  []tar.Header
		contents map[string]string
		wantErr  string
		exist    []string
		absent   []string
	}{
		"plain tree": {
			entries:  []tar.Header{{Name: "top/", Typeflag: tar.TypeDir}, reg("top/a/b.yaml")},
			contents: map[string]string{"top/a/b.yaml": "x: 1\n"},
			exist:    []string{"a/b.yaml"},
		},
		"dot-dot path": {
			entries: []tar.Header{reg("top/../../evil")}, wantErr: "leaves the repository tree",
		},
		"absolute symlink skipped": {
			entries: []tar.Header{link("top/etc", "/etc")}, absent: []string{"etc"},
		},
		"escaping symlink skipped": {
			entries: []tar.Header{link("top/a/up", "../../..")}, absent: []string{"a/up"},
		},
		"absolute path": {
			entries:  []tar.Header{reg("/top/etc/passwd")},
			contents: map[string]string{"/top/etc/passwd": "x\n"},
			wantErr:  "leaves the repository tree",
		},
		"dot-dot inside a path": {
			entries: []tar.Header{reg("top/a/../../../evil")}, wantErr: "leaves the repository tree",
		},
		"symlink to the tree itself skipped": {
			entries: []tar.Header{link("top/a/self", "..")}, absent: []string{"a/self"},
		},
		"entry beyond a symlink refused": {
			// up -> a is inside the tree, but a link written through it would be
			// checked from the wrong folder and could point outside.
			entries: []tar.Header{{Name: "top/a/b/", Typeflag: tar.TypeDir}, link("top/a/b/up", ".."), link("top/a/b/up/l", "../../x")},
			wantErr: "beyond the symbolic link",
		},
		"file written through a symlink refused": {
			entries:  []tar.Header{{Name: "top/real/", Typeflag: tar.TypeDir}, link("top/alias", "real"), reg("top/alias/f.yaml")},
			contents: map[string]string{"top/alias/f.yaml": "x\n"},
			wantErr:  "beyond the symbolic link",
		},
		"devices, fifos and hard links not created": {
			entries: []tar.Header{
				{Name: "top/null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3},
				{Name: "top/disk", Typeflag: tar.TypeBlock, Devmajor: 8},
				{Name: "top/pipe", Typeflag: tar.TypeFifo},
				{Name: "top/passwd", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"},
			},
			absent: []string{"null", "disk", "pipe", "passwd"},
		},
		"inner symlink kept": {
			entries:  []tar.Header{reg("top/a.yaml"), link("top/b.yaml", "a.yaml")},
			contents: map[string]string{"top/a.yaml": "x\n"},
			exist:    []string{"b.yaml"},
		},
		"file over the per-file cap": {
			entries: []tar.Header{reg("top/big")}, contents: map[string]string{"top/big": strings.Repeat("x", 11)},
			wantErr: "limit",
		},
		"total over the cap": {
			entries:  []tar.Header{reg("top/a"), reg("top/b")},
			contents: map[string]string{"top/a": strings.Repeat("x", 9), "top/b": strings.Repeat("x", 9)},
			wantErr:  "bytes in all",
		},
		"too many entries": {
			entries: []tar.Header{reg("top/1"), reg("top/2"), reg("top/3"), reg("top/4"), reg("top/5"), reg("top/6")},
			wantErr: "more than 5 entries",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := github.ExtractTarball(bytes.NewReader(tarball(t, tc.entries, tc.contents)), dir, limits)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.exist {
				if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
					t.Errorf("%s missing: %v", p, err)
				}
			}
			for _, p := range tc.absent {
				if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
					t.Errorf("%s was created", p)
				}
			}
		})
	}
}

func TestArchiveCacheEvictsLeastRecentlyUsedUnused(t *testing.T) {
	cache, err := github.NewArchiveCache(t.TempDir(), 10, github.DefaultArchiveLimits)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fetch := func(body string) github.Fetcher {
		return func(context.Context) (io.ReadCloser, error) {
			h := []tar.Header{{Name: "top/f", Typeflag: tar.TypeReg, Mode: 0o644}}
			return io.NopCloser(bytes.NewReader(tarball(t, h, map[string]string{"top/f": body}))), nil
		}
	}
	sha := func(i int) string { return fmt.Sprintf("%040d", i) }
	held, err := cache.Get(ctx, "o/r", sha(1), fetch("123456"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := cache.Get(ctx, "o/r", sha(2), fetch("123456"))
	if err != nil {
		t.Fatal(err)
	}
	other.Release()
	// Over the bound: sha(2) is unused and goes; sha(1) is held and stays.
	if _, err := os.Stat(held.Dir); err != nil {
		t.Fatalf("held snapshot evicted: %v", err)
	}
	if _, err := os.Stat(other.Dir); err == nil {
		t.Fatalf("unused snapshot kept over the size bound")
	}
	held.Release()
}

func TestGitDataResolveCommitBranch(t *testing.T) {
	s := githubtest.New(t)
	c := installationClient(t, s, map[string]string{"apps/web/deploy.yaml": "replicas: 3\n"})
	ctx := context.Background()
	head := s.Head(t, "acme/deploy", "main")
	s.CreateTag(t, "acme/deploy", "v1.0.0", "main")
	s.CreateBranch(t, "acme/deploy", "release", "main")

	for name, tc := range map[string]struct {
		rev     string
		want    string
		wantErr error
	}{
		"HEAD is the default branch":  {rev: "HEAD", want: "main"},
		"empty is the default branch": {rev: "", want: "main"},
		"branch":                      {rev: "release", want: "release"},
		"refs/heads form":             {rev: "refs/heads/main", want: "main"},
		"tag":                         {rev: "v1.0.0", wantErr: github.ErrNotABranch},
		"commit sha":                  {rev: head, wantErr: github.ErrNotABranch},
		"missing":                     {rev: "nope", wantErr: github.ErrRevisionNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := github.ResolveRevision(ctx, c, "acme", "deploy", tc.rev)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || b.Name != tc.want || b.SHA != head {
				t.Fatalf("got %+v %v, want %s at %s", b, err, tc.want, head)
			}
		})
	}

	ci, err := github.CreateCommit(ctx, c, "acme", "deploy", head, "scale\n\nKukie-Plan: abc", []github.FileChange{
		{Path: "apps/web/deploy.yaml", Content: []byte("replicas: 4\n")},
		{Path: "apps/web/new.yaml", Content: []byte("kind: Service\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := github.SetBranch(ctx, c, "acme", "deploy", "kukie/abc", ci.SHA); err != nil {
		t.Fatal(err)
	}
	// A second SetBranch (a resumed step) is fine and moves nothing.
	if err := github.SetBranch(ctx, c, "acme", "deploy", "kukie/abc", ci.SHA); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.FileAt(t, "acme/deploy", "kukie/abc", "apps/web/deploy.yaml"); got != "replicas: 4\n" {
		t.Fatalf("branch content %q", got)
	}
	if got := s.Head(t, "acme/deploy", "main"); got != head {
		t.Fatalf("main moved to %s", got)
	}
	if err := github.SetBranch(ctx, c, "acme", "deploy", "main", ci.SHA); !errors.Is(err, github.ErrNotOurBranch) {
		t.Fatalf("SetBranch(main) = %v, want ErrNotOurBranch", err)
	}
	info, err := github.GetCommit(ctx, c, "acme", "deploy", ci.SHA)
	if err != nil || len(info.Parents) != 1 || info.Parents[0] != head || !strings.Contains(info.Message, "Kukie-Plan: abc") {
		t.Fatalf("commit %+v %v", info, err)
	}
	if ok, err := github.Contains(ctx, c, "acme", "deploy", head, ci.SHA); err != nil || !ok {
		t.Fatalf("Contains(base, commit) = %v %v", ok, err)
	}
	if ok, err := github.Contains(ctx, c, "acme", "deploy", ci.SHA, head); err != nil || ok {
		t.Fatalf("Contains(commit, base) = %v %v", ok, err)
	}

	// Pull requests: open once, adopt afterwards.
	np := github.NewPull{Title: "kukie: scale Deployment/web (abc)", Body: "body\n" + github.PlanMarker("abc"), Head: "kukie/abc", Base: "main"}
	pr, err := github.OpenPull(ctx, c, "acme", "deploy", np)
	if err != nil {
		t.Fatal(err)
	}
	again, err := github.OpenPull(ctx, c, "acme", "deploy", np)
	if err != nil || again.Number != pr.Number {
		t.Fatalf("second OpenPull = %+v %v, want adoption of #%d", again, err, pr.Number)
	}
	if n := len(s.PullRequests(t, "acme/deploy")); n != 1 {
		t.Fatalf("%d pull requests, want 1", n)
	}
	if code, ok := github.PlanCodeFromBody(pr.Body); !ok || code != "abc" {
		t.Fatalf("plan marker read back as %q %v", code, ok)
	}

	// Check runs: 120 annotations in batches of 50, output cut to the limit, one run
	// even when published twice for the same plan.
	var anns []github.Annotation
	for i := range 120 {
		anns = append(anns, github.Annotation{Path: "apps/web/deploy.yaml", StartLine: 1 + i%1, Message: "m"})
	}
	report := github.CheckReport{ExternalID: "abc", Conclusion: github.ConclusionSuccess, Title: "Verified",
		Summary: strings.Repeat("é", 40000), Text: "```diff\n" + strings.Repeat("+x\n", 30000) + "```\n",
		Annotations: anns, DetailsURL: "https://kukie.example/api/v1/changes/abc"}
	ref, err := github.PublishCheckRun(ctx, c, "acme", "deploy", ci.SHA, 0, report)
	if err != nil {
		t.Fatal(err)
	}
	// The fake refuses more than 50 per request, so all 120 arriving proves batching.
	if n := len(listAnnotations(t, c, ref.ID)); n != len(anns) {
		t.Fatalf("%d annotations on the run, want %d", n, len(anns))
	}
	if n := s.RequestCount("PATCH /repos/{owner}/{repo}/check-runs/{id}"); n != 2 {
		t.Fatalf("%d check run updates, want 2 (annotations 51-100 and 101-120)", n)
	}
	ref2, err := github.PublishCheckRun(ctx, c, "acme", "deploy", ci.SHA, 0, report)
	if err != nil || ref2.ID != ref.ID {
		t.Fatalf("second publish: %+v %v, want run %d adopted", ref2, err, ref.ID)
	}
	runs := s.CheckRuns(t, "acme/deploy", ci.SHA)
	if len(runs) != 1 {
		t.Fatalf("%d check runs, want 1", len(runs))
	}
	out := runs[0].GetOutput()
	if len(out.GetSummary()) > github.MaxOutputChars || !strings.Contains(out.GetSummary(), report.DetailsURL) {
		t.Fatalf("summary not cut with a details link (len %d)", len(out.GetSummary()))
	}
	if runs[0].GetConclusion() != "success" || runs[0].GetName() != github.CheckRunName {
		t.Fatalf("run %s %s", runs[0].GetName(), runs[0].GetConclusion())
	}
	if acts := s.CheckRunActions(t, "acme/deploy", ref.ID); len(acts) != 1 || acts[0].Identifier != github.RerenderAction {
		t.Fatalf("actions %+v", acts)
	}
}

func TestFitOutputClosesFence(t *testing.T) {
	got := github.FitOutput("```diff\n"+strings.Repeat("+line\n", 100), 200, "https://x")
	if len(got) > 200 || strings.Count(got, "```")%2 != 0 || !strings.HasSuffix(got, "https://x") {
		t.Fatalf("FitOutput = %q (len %d)", got, len(got))
	}
}

func TestRenderCacheKeepsOutputWithinItsBound(t *testing.T) {
	c, err := github.NewRenderCache(t.TempDir(), 10)
	if err != nil {
		t.Fatal(err)
	}
	k1 := github.RenderKey("o/r", strings.Repeat("a", 40), "apps/web", "Kustomize")
	k2 := github.RenderKey("o/r", strings.Repeat("b", 40), "apps/web", "Kustomize")
	if k1 == k2 || k1 != github.RenderKey("o/r", strings.Repeat("a", 40), "apps/web", "Kustomize") {
		t.Fatal("render keys are not a function of repository, commit, path and options")
	}
	if err := c.Store(k1, []byte("123456")); err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Load(k1); !ok || string(got) != "123456" {
		t.Fatalf("Load = %q %v", got, ok)
	}
	if err := c.Store(k2, []byte("abcdef")); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Load(k1); ok {
		t.Fatal("the older entry survived past the size bound")
	}
	if got, ok := c.Load(k2); !ok || string(got) != "abcdef" {
		t.Fatalf("newest entry: %q %v", got, ok)
	}
	if st := c.Stats(); st.Hits != 2 || st.Misses != 1 {
		t.Fatalf("stats %+v, want 2 hits and 1 miss", st)
	}
}

func TestRenderCacheEntriesAppearWhole(t *testing.T) {
	c, err := github.NewRenderCache(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	key := github.RenderKey("o/r", strings.Repeat("a", 40), "apps/web", "Directory")
	small, large := []byte("v1"), bytes.Repeat([]byte("x"), 64<<10)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			out := small
			if i%2 == 1 {
				out = large
			}
			if err := c.Store(key, out); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if got, ok := c.Load(key); ok && !bytes.Equal(got, small) && !bytes.Equal(got, large) {
				t.Errorf("read a partly written entry of %d bytes", len(got))
			}
		}()
	}
	wg.Wait()
}

func listAnnotations(t *testing.T, c *gh.Client, id int64) []*gh.CheckRunAnnotation {
	t.Helper()
	var all []*gh.CheckRunAnnotation
	opts := &gh.ListOptions{PerPage: 100}
	for {
		got, res, err := c.Checks.ListCheckRunAnnotations(context.Background(), "acme", "deploy", id, opts)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got...)
		if res.NextPage == 0 {
			return all
		}
		opts.Page = res.NextPage
	}
}

// TestBranchWritesRefuseEveryBranchButKukie tries to move and delete base branches
// and look-alikes: each is refused before any request reaches GitHub.
func TestBranchWritesRefuseEveryBranchButKukie(t *testing.T) {
	s := githubtest.New(t)
	c := installationClient(t, s, map[string]string{"a.yaml": "a: 1\n"})
	ctx := context.Background()
	head := s.Head(t, "acme/deploy", "main")
	s.CreateBranch(t, "acme/deploy", "release", "main")
	other := s.PushCommit(t, "acme/deploy", "release", map[string]string{"a.yaml": "a: 2\n"}, githubtest.DefaultAuthor)
	s.ResetRequestCounts()
	for _, branch := range []string{"main", "release", "refs/heads/main", "kukie", "kukiex/y", "Kukie/x", "/kukie/x", "heads/kukie/x", ""} {
		t.Run("branch "+branch, func(t *testing.T) {
			if err := github.SetBranch(ctx, c, "acme", "deploy", branch, other); !errors.Is(err, github.ErrNotOurBranch) {
				t.Fatalf("SetBranch(%q) = %v, want ErrNotOurBranch", branch, err)
			}
			if err := github.DeleteBranch(ctx, c, "acme", "deploy", branch); !errors.Is(err, github.ErrNotOurBranch) {
				t.Fatalf("DeleteBranch(%q) = %v, want ErrNotOurBranch", branch, err)
			}
		})
	}
	if n := s.TotalRequests(); n != 0 {
		t.Fatalf("%d requests reached GitHub for refused branch writes: %v", n, s.RequestCounts())
	}
	if got := s.Head(t, "acme/deploy", "main"); got != head {
		t.Fatalf("main moved to %s", got)
	}
	if got := s.Head(t, "acme/deploy", "release"); got != other {
		t.Fatalf("release moved to %s", got)
	}
}
