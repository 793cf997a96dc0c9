package github_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/internal/markdowntest"
	"github.com/kukie/kukie-gitops/markdown"
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
	archives, err := cache.NewArchives(t.TempDir(), 64<<20, cache.DefaultArchiveLimits)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			snap, err := archives.Get(ctx, "acme/deploy", sha, github.TarballFetcher(c, "acme", "deploy", sha))
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
	snap, err := archives.Get(ctx, "acme/deploy", sha, func(context.Context) (io.ReadCloser, error) {
		return nil, errors.New("must not download again")
	})
	if err != nil {
		t.Fatal(err)
	}
	snap.Release()
	// The eight racing lookups missed (one downloaded, the rest waited on it) unless
	// one came after the download; the last one was a hit.
	if st := archives.Stats(); st.Hits+st.Misses != 9 || st.Misses == 0 || st.Hits == 0 {
		t.Fatalf("stats %+v, want 9 lookups, the first a miss and the last a hit", st)
	}
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

// TestFitOutputClosesTheFenceItCut: a block fenced longer than "```" (its diff holds
// a "```" line) is closed with its own fence, which "```" would not close, and a
// block closed before the cut is left alone.
func TestFitOutputClosesTheFenceItCut(t *testing.T) {
	for _, s := range []string{
		markdown.CodeBlock("diff", strings.Repeat(" ```\n+line\n", 40)),
		markdown.CodeBlock("diff", "+a\n") + "text\n\n" + markdown.CodeBlock("diff", strings.Repeat("+line\n", 100)),
		markdown.CodeBlock("diff", "+a\n") + strings.Repeat("text ", 100),
	} {
		for _, limit := range []int{100, 200, 255} {
			got := github.FitOutput(s, limit, "https://x")
			if len(got) > limit || markdown.OpenFence(got) != "" || !strings.HasSuffix(got, "https://x") {
				t.Errorf("FitOutput(%d) = %q (len %d), open fence %q", limit, got, len(got), markdown.OpenFence(got))
			}
			if read := markdowntest.Parse(got); !strings.Contains(read.Prose, "output cut to fit") {
				t.Errorf("FitOutput(%d): the note is not read as text: %q", limit, read.Prose)
			}
		}
	}
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

// TestFitOutputCutsAtALineEnd: a cut inside a line could end inside a code span,
// leaving its backticks open and the rest of the line, words from elsewhere, read
// as Markdown; the cut keeps whole lines, so every span the output keeps is closed.
func TestFitOutputCutsAtALineEnd(t *testing.T) {
	const hostile = "kustomize: @acme/admins ![x](https://tracker.example/p.png) [docs](https://phish.example) `x`"
	var b strings.Builder
	b.WriteString("### Not checked\n")
	for range 40 {
		b.WriteString("- argocd/web: " + markdown.CodeLine(hostile) + "\n")
	}
	s := b.String()
	for limit := 100; limit < len(s); limit += 7 {
		got := github.FitOutput(s, limit, "https://x")
		read := markdowntest.Parse(got)
		if len(got) > limit || strings.Contains(read.Prose, "@acme") || len(read.Destinations) != 0 {
			t.Fatalf("FitOutput(%d) = %q (len %d): read as Markdown %q, links %q", limit, got, len(got), read.Prose, read.Destinations)
		}
		if !strings.HasSuffix(got, "https://x") || !strings.HasPrefix(got, "### Not checked\n") {
			t.Fatalf("FitOutput(%d) = %q", limit, got)
		}
	}
}

// TestFitOutputKeepsPartOfALongLineOfADiff: a diff of one line longer than the
// limit (a dashboard's JSON in a ConfigMap) keeps what fits, cut inside the
// fenced block where nothing is Markdown, and the block is closed before the note.
func TestFitOutputKeepsPartOfALongLineOfADiff(t *testing.T) {
	line := "+  dashboard.json: '{\"title\": \"@acme/admins [x](https://phish.example) é" + strings.Repeat("\\\"panel\\\": 1, `x` ", 400) + "\"}'\n"
	for _, s := range []string{
		"### apps/web\n\n" + markdown.CodeBlock("diff", line),
		"### apps/web\n\n" + markdown.CodeBlock("diff", " ```\n"+line),
	} {
		for _, limit := range []int{200, 1000, 4001} {
			got := github.FitOutput(s, limit, "https://x")
			read := markdowntest.Parse(got)
			if len(got) > limit || markdown.OpenFence(got) != "" || !strings.HasSuffix(got, "https://x") || !utf8.ValidString(got) {
				t.Fatalf("FitOutput(%d) = %q (len %d), open fence %q", limit, got, len(got), markdown.OpenFence(got))
			}
			if !strings.Contains(got, "+  dashboard.json:") || strings.Contains(read.Prose, "@acme") || len(read.Destinations) != 0 {
				t.Fatalf("FitOutput(%d) = %q: the line is not kept as code (prose %q, links %q)", limit, got, read.Prose, read.Destinations)
			}
			if !strings.Contains(read.Prose, "output cut to fit") {
				t.Errorf("FitOutput(%d): the note is not read as text: %q", limit, read.Prose)
			}
		}
	}
}

// TestCheckRunTitlesAndMessagesAreCutAsPlainText: a run's title and an
// annotation's title and message are shown as plain text: they are cut within
// GitHub's limits at a whole character and marked "…", without the Markdown note
// and fence the summary gets.
func TestCheckRunTitlesAndMessagesAreCutAsPlainText(t *testing.T) {
	ctx := context.Background()
	s := githubtest.New(t)
	c := installationClient(t, s, map[string]string{"apps/web/deploy.yaml": "a: 1\n"})
	head := s.Head(t, "acme/deploy", "main")
	long := "```\n" + strings.Repeat("é", 40000)
	report := github.CheckReport{ExternalID: "abc", Conclusion: github.ConclusionSuccess, Title: long, Summary: "s",
		Annotations: []github.Annotation{{Path: "apps/web/deploy.yaml", StartLine: 1, Title: long, Message: long}}}
	ref, err := github.PublishCheckRun(ctx, c, "acme", "deploy", head, 0, report)
	if err != nil {
		t.Fatal(err)
	}
	cut := func(what, got string, limit int) {
		t.Helper()
		kept := strings.TrimSuffix(got, "…")
		if len(got) > limit || !utf8.ValidString(got) || kept == got || !strings.HasPrefix(long, kept) {
			t.Errorf("%s = %q… (len %d), want at most %d bytes of it, cut at a whole character and marked …", what, got[:min(len(got), 40)], len(got), limit)
		}
	}
	runs := s.CheckRuns(t, "acme/deploy", head)
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	cut("title", runs[0].GetOutput().GetTitle(), github.MaxTitleChars)
	anns := listAnnotations(t, c, ref.ID)
	if len(anns) != 1 {
		t.Fatalf("%d annotations", len(anns))
	}
	cut("annotation title", anns[0].GetTitle(), github.MaxTitleChars)
	cut("annotation message", anns[0].GetMessage(), github.MaxAnnotationMessage)
}
