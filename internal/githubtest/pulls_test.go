package githubtest

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
)

// pushPlanBranch makes a branch with one commit through the git data API, as the
// service does.
func pushPlanBranch(t *testing.T, c *github.Client, s *Server, branch string, files map[string]string) string {
	t.Helper()
	base := s.Head(t, "acme/deploy", "main")
	baseCommit, _, err := c.Git.GetCommit(ctx, "acme", "deploy", base)
	if err != nil {
		t.Fatal(err)
	}
	var entries []*github.TreeEntry
	for p, content := range files {
		entries = append(entries, &github.TreeEntry{Path: ptr(p), Mode: ptr("100644"), Type: ptr("blob"), Content: ptr(content)})
	}
	tree, _, err := c.Git.CreateTree(ctx, "acme", "deploy", baseCommit.GetTree().GetSHA(), entries)
	if err != nil {
		t.Fatal(err)
	}
	commit, _, err := c.Git.CreateCommit(ctx, "acme", "deploy", &github.Commit{Message: ptr("change"), Tree: tree, Parents: []*github.Commit{{SHA: ptr(base)}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Git.CreateRef(ctx, "acme", "deploy", &github.Reference{Ref: ptr("refs/heads/" + branch), Object: &github.GitObject{SHA: commit.SHA}}); err != nil {
		t.Fatal(err)
	}
	return commit.GetSHA()
}

func TestPullRequestLifecycle(t *testing.T) {
	s := New(t)
	rc := newReceiver(t, s)
	c, _ := installedRepo(t, s, map[string]string{"apps/web/deployment.yaml": "replicas: 1\n"})
	head := pushPlanBranch(t, c, s, "kukie/plan-1", map[string]string{"apps/web/deployment.yaml": "replicas: 3\n"})

	pr, _, err := c.PullRequests.Create(ctx, "acme", "deploy", &github.NewPullRequest{
		Title: ptr("Scale web to 3"), Head: ptr("acme:kukie/plan-1"), Base: ptr("main"), Body: ptr("why"),
	})
	if err != nil {
		t.Fatalf("create pull request: %v", err)
	}
	if pr.GetNumber() != 1 || pr.GetHead().GetSHA() != head || pr.GetBase().GetRef() != "main" || pr.GetState() != "open" ||
		!strings.HasSuffix(pr.GetHTMLURL(), "/acme/deploy/pull/1") || pr.GetUser().GetLogin() != s.BotLogin() {
		t.Errorf("created pull request = %+v", pr)
	}

	_, _, err = c.PullRequests.Create(ctx, "acme", "deploy", &github.NewPullRequest{Title: ptr("again"), Head: ptr("kukie/plan-1"), Base: ptr("main")})
	er := wantStatus(t, err, http.StatusUnprocessableEntity)
	if len(er.Errors) != 1 || er.Errors[0].Message != "A pull request already exists for acme:kukie/plan-1." {
		t.Errorf("duplicate errors = %+v", er.Errors)
	}
	s.CreateBranch(t, "acme/deploy", "empty", "main")
	_, _, err = c.PullRequests.Create(ctx, "acme", "deploy", &github.NewPullRequest{Title: ptr("t"), Head: ptr("empty"), Base: ptr("main")})
	if er := wantStatus(t, err, http.StatusUnprocessableEntity); len(er.Errors) != 1 || er.Errors[0].Message != "No commits between main and empty" {
		t.Errorf("no-commits errors = %+v", er.Errors)
	}
	_, _, err = c.PullRequests.Create(ctx, "acme", "deploy", &github.NewPullRequest{Title: ptr("t"), Head: ptr("missing"), Base: ptr("main")})
	wantStatus(t, err, http.StatusUnprocessableEntity)

	got, _, err := c.PullRequests.Get(ctx, "acme", "deploy", 1)
	if err != nil {
		t.Fatal(err)
	}
	if !got.GetMergeable() || got.GetMerged() || got.GetMergeableState() != "clean" || got.GetChangedFiles() != 1 {
		t.Errorf("pull request = mergeable %v merged %v state %s files %d", got.GetMergeable(), got.GetMerged(), got.GetMergeableState(), got.GetChangedFiles())
	}
	files, _, err := c.PullRequests.ListFiles(ctx, "acme", "deploy", 1, nil)
	if err != nil || len(files) != 1 || files[0].GetFilename() != "apps/web/deployment.yaml" || files[0].GetStatus() != "modified" {
		t.Fatalf("files = %v, %v", files, err)
	}
	if !strings.Contains(files[0].GetPatch(), "-replicas: 1") || !strings.Contains(files[0].GetPatch(), "+replicas: 3") {
		t.Errorf("patch = %q", files[0].GetPatch())
	}

	listTests := map[string]struct {
		opts *github.PullRequestListOptions
		want int
	}{
		"by head, open": {opts: &github.PullRequestListOptions{Head: "acme:kukie/plan-1"}, want: 1},
		"other head":    {opts: &github.PullRequestListOptions{Head: "acme:other"}, want: 0},
		"closed":        {opts: &github.PullRequestListOptions{State: "closed"}, want: 0},
		"all":           {opts: &github.PullRequestListOptions{State: "all"}, want: 1},
	}
	for name, tc := range listTests {
		t.Run(name, func(t *testing.T) {
			prs, _, err := c.PullRequests.List(ctx, "acme", "deploy", tc.opts)
			if err != nil || len(prs) != tc.want {
				t.Errorf("list = %d, %v; want %d", len(prs), err, tc.want)
			}
		})
	}

	// Someone else pushes to the PR branch: synchronize with the new head.
	pushed := s.PushCommit(t, "acme/deploy", "kukie/plan-1", map[string]string{"extra.txt": "x\n"}, DefaultAuthor)
	if got, _, _ := c.PullRequests.Get(ctx, "acme", "deploy", 1); got.GetHead().GetSHA() != pushed {
		t.Errorf("head after push = %s, want %s", got.GetHead().GetSHA(), pushed)
	}
	var syncs []*github.PullRequestEvent
	for _, p := range rc.of("pull_request") {
		if ev := p.(*github.PullRequestEvent); ev.GetAction() == "synchronize" {
			syncs = append(syncs, ev)
		}
	}
	if len(syncs) != 1 || syncs[0].GetAfter() != pushed || syncs[0].GetBefore() != head || syncs[0].GetSender().GetLogin() != "octocat" {
		t.Errorf("synchronize events = %+v", syncs)
	}

	// Edit and close through the API.
	upd, _, err := c.PullRequests.Edit(ctx, "acme", "deploy", 1, &github.PullRequest{Title: ptr("New title"), State: ptr("closed")})
	if err != nil || upd.GetTitle() != "New title" || upd.GetState() != "closed" || upd.GetMerged() {
		t.Fatalf("edit = %+v, %v", upd, err)
	}
	_, _, err = c.PullRequests.Get(ctx, "acme", "deploy", 99)
	wantStatus(t, err, http.StatusNotFound)
}

func TestMergeFiresWebhooks(t *testing.T) {
	for _, method := range []MergeMethod{MergeCommit, Squash} {
		t.Run(string(method), func(t *testing.T) {
			s := New(t)
			rc := newReceiver(t, s)
			c, _ := installedRepo(t, s, map[string]string{"apps/web/deployment.yaml": "replicas: 1\n", "other": "o\n"})
			head := pushPlanBranch(t, c, s, "kukie/plan-1", map[string]string{"apps/web/deployment.yaml": "replicas: 3\n"})
			pr, _, err := c.PullRequests.Create(ctx, "acme", "deploy", &github.NewPullRequest{Title: ptr("Scale"), Head: ptr("kukie/plan-1"), Base: ptr("main")})
			if err != nil {
				t.Fatal(err)
			}
			// The base moves on meanwhile (no conflict): the merge is three-way.
			baseBefore := s.PushCommit(t, "acme/deploy", "main", map[string]string{"other": "changed\n"}, DefaultAuthor)

			merged := s.Merge(t, "acme/deploy", pr.GetNumber(), method)
			if s.Head(t, "acme/deploy", "main") != merged {
				t.Fatalf("main did not move to the merge commit")
			}
			dir := s.GitDir(t, "acme/deploy")
			parents := strings.Fields(gitOut(t, dir, "rev-list", "--parents", "-n", "1", merged))[1:]
			wantParents := []string{baseBefore, head}
			if method == Squash {
				wantParents = []string{baseBefore}
			}
			if strings.Join(parents, " ") != strings.Join(wantParents, " ") {
				t.Errorf("parents = %v, want %v", parents, wantParents)
			}
			for path, want := range map[string]string{"apps/web/deployment.yaml": "replicas: 3\n", "other": "changed\n"} {
				if got, _ := s.FileAt(t, "acme/deploy", "main", path); got != want {
					t.Errorf("%s after merge = %q, want %q", path, got, want)
				}
			}
			got, _, err := c.PullRequests.Get(ctx, "acme", "deploy", pr.GetNumber())
			if err != nil || !got.GetMerged() || got.GetState() != "closed" || got.GetMergeCommitSHA() != merged {
				t.Errorf("merged pull request = %+v, %v", got, err)
			}

			var closed *github.PullRequestEvent
			for _, p := range rc.of("pull_request") {
				if ev := p.(*github.PullRequestEvent); ev.GetAction() == "closed" {
					closed = ev
				}
			}
			if closed == nil || !closed.GetPullRequest().GetMerged() || closed.GetPullRequest().GetMergeCommitSHA() != merged || closed.GetInstallation().GetID() == 0 {
				t.Errorf("closed event = %+v", closed)
			}
			var basePush *github.PushEvent
			for _, p := range rc.of("push") {
				if ev := p.(*github.PushEvent); ev.GetRef() == "refs/heads/main" && ev.GetAfter() == merged {
					basePush = ev
				}
			}
			if basePush == nil || basePush.GetBefore() != baseBefore || basePush.GetHeadCommit().GetID() != merged {
				t.Errorf("push to base = %+v", basePush)
			}
		})
	}
}

func TestMergeConflictIsNotMergeable(t *testing.T) {
	s := New(t)
	c, pr := openFeaturePull(t, s)
	s.PushCommit(t, "acme/deploy", "main", map[string]string{"f": "3\n"}, DefaultAuthor)
	got, _, err := c.PullRequests.Get(ctx, "acme", "deploy", pr.GetNumber())
	if err != nil || got.GetMergeable() || got.GetMergeableState() != "dirty" {
		t.Errorf("conflicting pull request: mergeable %v state %s, %v", got.GetMergeable(), got.GetMergeableState(), err)
	}
}

// openFeaturePull serves acme/deploy with f on main and a branch feature that
// changes it, opens feature's pull request into main as the App, and returns the
// App's client and the pull request.
func openFeaturePull(t *testing.T, s *Server) (*github.Client, *github.PullRequest) {
	t.Helper()
	c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
	pushPlanBranch(t, c, s, "feature", map[string]string{"f": "2\n"})
	pr, _, err := c.PullRequests.Create(ctx, "acme", "deploy", &github.NewPullRequest{Title: ptr("t"), Head: ptr("feature"), Base: ptr("main")})
	if err != nil {
		t.Fatal(err)
	}
	return c, pr
}

func TestIssueComments(t *testing.T) {
	s := New(t)
	rc := newReceiver(t, s)
	c, _ := installedRepo(t, s, map[string]string{"f": "1\n"})
	pushPlanBranch(t, c, s, "feature", map[string]string{"f": "2\n"})
	pr, _, err := c.PullRequests.Create(ctx, "acme", "deploy", &github.NewPullRequest{Title: ptr("t"), Head: ptr("feature"), Base: ptr("main")})
	if err != nil {
		t.Fatal(err)
	}
	made, _, err := c.Issues.CreateComment(ctx, "acme", "deploy", pr.GetNumber(), &github.IssueComment{Body: ptr("plan ok")})
	if err != nil || made.GetUser().GetLogin() != s.BotLogin() {
		t.Fatalf("create comment = %+v, %v", made, err)
	}
	s.CommentOnPullRequest(t, "acme/deploy", pr.GetNumber(), DefaultAuthor, "/kukie rerender")
	list, _, err := c.Issues.ListComments(ctx, "acme", "deploy", pr.GetNumber(), nil)
	if err != nil || len(list) != 2 || list[1].GetBody() != "/kukie rerender" {
		t.Fatalf("comments = %v, %v", list, err)
	}
	if _, _, err := c.Issues.EditComment(ctx, "acme", "deploy", made.GetID(), &github.IssueComment{Body: ptr("edited")}); err != nil {
		t.Fatalf("edit comment: %v", err)
	}
	_, _, err = c.Issues.CreateComment(ctx, "acme", "deploy", pr.GetNumber(), &github.IssueComment{Body: ptr(strings.Repeat("x", 65537))})
	wantStatus(t, err, http.StatusUnprocessableEntity)
	_, _, err = c.Issues.CreateComment(ctx, "acme", "deploy", 42, &github.IssueComment{Body: ptr("x")})
	wantStatus(t, err, http.StatusNotFound)

	events := rc.of("issue_comment")
	if len(events) < 2 {
		t.Fatalf("issue_comment events = %d", len(events))
	}
	person := events[1].(*github.IssueCommentEvent)
	if person.GetAction() != "created" || person.GetComment().GetBody() != "/kukie rerender" || !person.GetIssue().IsPullRequest() || person.GetSender().GetLogin() != "octocat" {
		t.Errorf("issue_comment = %+v", person)
	}
}

// TestIssueCommentsSince: the list of a pull request's comments takes since, as
// GitHub's does, and keeps the comments updated at or after it (an old comment
// edited since is in it), oldest first; a since that is not an ISO 8601 time is
// GitHub's 422.
func TestIssueCommentsSince(t *testing.T) {
	s := New(t)
	c, pr := openFeaturePull(t, s)
	comment := func(body string) *github.IssueComment {
		t.Helper()
		made, _, err := c.Issues.CreateComment(ctx, "acme", "deploy", pr.GetNumber(), &github.IssueComment{Body: ptr(body)})
		if err != nil {
			t.Fatal(err)
		}
		return made
	}
	old := comment("old")
	s.Clock().Advance(10 * time.Minute)
	recent := comment("recent")
	bodies := func(since time.Time) []string {
		t.Helper()
		list, _, err := c.Issues.ListComments(ctx, "acme", "deploy", pr.GetNumber(), &github.IssueListCommentsOptions{Since: &since})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, cm := range list {
			out = append(out, cm.GetBody())
		}
		return out
	}
	if got := bodies(recent.GetCreatedAt().Time); !slices.Equal(got, []string{"recent"}) {
		t.Errorf("since the recent comment's time: %q, want it alone (at or after)", got)
	}
	if got := bodies(old.GetCreatedAt().Time); !slices.Equal(got, []string{"old", "recent"}) {
		t.Errorf("since the old comment's time: %q, want both, oldest first", got)
	}
	s.Clock().Advance(10 * time.Minute)
	if _, _, err := c.Issues.EditComment(ctx, "acme", "deploy", old.GetID(), &github.IssueComment{Body: ptr("old, edited")}); err != nil {
		t.Fatal(err)
	}
	if got := bodies(recent.GetCreatedAt().Time.Add(time.Minute)); !slices.Equal(got, []string{"old, edited"}) {
		t.Errorf("since after the recent comment: %q, want the edited old one", got)
	}
	req, err := c.NewRequest(http.MethodGet, fmt.Sprintf("repos/acme/deploy/issues/%d/comments?since=yesterday", pr.GetNumber()), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(ctx, req, nil)
	wantStatus(t, err, http.StatusUnprocessableEntity)
}
