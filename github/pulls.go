package github

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"
)

// PlanMarker is the hidden line in a PR body that names the plan behind it, so a PR
// can be traced to its plan even if its branch was renamed.
func PlanMarker(code string) string { return "<!-- kukie-plan: " + code + " -->" }

// PlanCodeFromBody returns the plan code of a body carrying PlanMarker.
func PlanCodeFromBody(body string) (string, bool) {
	const open, end = "<!-- kukie-plan: ", " -->"
	i := strings.Index(body, open)
	if i < 0 {
		return "", false
	}
	rest := body[i+len(open):]
	j := strings.Index(rest, end)
	if j <= 0 {
		return "", false
	}
	return rest[:j], true
}

// PullRequest is the part of a pull request the pipeline reads.
type PullRequest struct {
	Number   int64
	URL      string
	State    string // open, closed
	Merged   bool
	MergeSHA string
	HeadRef  string
	HeadSHA  string
	// HeadRepo is the head's repository ("owner/name", normalized); a fork's
	// differs from the base's, and a deleted fork's is empty.
	HeadRepo string
	BaseRef  string
	BaseSHA  string
	// DefaultBranch is the base repository's default branch.
	DefaultBranch string
	Body          string
}

func pullOf(p *gh.PullRequest) PullRequest {
	return PullRequest{
		Number: int64(p.GetNumber()), URL: p.GetHTMLURL(), State: p.GetState(), Merged: p.GetMerged(),
		MergeSHA: p.GetMergeCommitSHA(), HeadRef: p.GetHead().GetRef(), HeadSHA: p.GetHead().GetSHA(),
		HeadRepo: NormalizeFullName(p.GetHead().GetRepo().GetFullName()),
		BaseRef:  p.GetBase().GetRef(), BaseSHA: p.GetBase().GetSHA(), Body: p.GetBody(),
		DefaultBranch: p.GetBase().GetRepo().GetDefaultBranch(),
	}
}

// FindPull returns the pull request (open or closed) whose head is branch in the same
// repository, newest first, or found=false.
func FindPull(ctx context.Context, c *gh.Client, owner, repo, branch string) (PullRequest, bool, error) {
	pulls, _, err := c.PullRequests.List(ctx, owner, repo, &gh.PullRequestListOptions{
		State: "all", Head: owner + ":" + branch, ListOptions: gh.ListOptions{PerPage: 10},
	})
	if err != nil {
		return PullRequest{}, false, fmt.Errorf("list pull requests for %s: %w", branch, err)
	}
	for _, p := range pulls {
		if p.GetHead().GetRef() == branch {
			return pullOf(p), true, nil
		}
	}
	return PullRequest{}, false, nil
}

// NewPull is a pull request to open.
type NewPull struct {
	Title string
	Body  string
	Head  string // a kukie branch of the same repository
	Base  string
}

// OpenPull opens a pull request, or adopts the one GitHub already has for that head
// (a resumed step): one branch never gets two pull requests.
func OpenPull(ctx context.Context, c *gh.Client, owner, repo string, np NewPull) (PullRequest, error) {
	if existing, found, err := FindPull(ctx, c, owner, repo, np.Head); err != nil {
		return PullRequest{}, err
	} else if found && existing.State == "open" {
		return existing, nil
	}
	p, resp, err := c.PullRequests.Create(ctx, owner, repo, &gh.NewPullRequest{
		Title: gh.String(np.Title), Body: gh.String(np.Body), Head: gh.String(np.Head), Base: gh.String(np.Base),
		MaintainerCanModify: gh.Bool(false),
	})
	if err == nil {
		return pullOf(p), nil
	}
	if resp != nil && resp.StatusCode == http.StatusUnprocessableEntity {
		// "A pull request already exists": opened concurrently; adopt it.
		if existing, found, ferr := FindPull(ctx, c, owner, repo, np.Head); ferr == nil && found {
			return existing, nil
		}
	}
	return PullRequest{}, fmt.Errorf("open pull request %s → %s: %w", np.Head, np.Base, err)
}

// GetPull reads one pull request.
func GetPull(ctx context.Context, c *gh.Client, owner, repo string, number int64) (PullRequest, error) {
	p, _, err := c.PullRequests.Get(ctx, owner, repo, int(number))
	if err != nil {
		return PullRequest{}, fmt.Errorf("read pull request #%d: %w", number, err)
	}
	return pullOf(p), nil
}

// EditPull replaces a pull request's title and body.
func EditPull(ctx context.Context, c *gh.Client, owner, repo string, number int64, title, body string) error {
	if _, _, err := c.PullRequests.Edit(ctx, owner, repo, int(number), &gh.PullRequest{Title: gh.String(title), Body: gh.String(body)}); err != nil {
		return fmt.Errorf("edit pull request #%d: %w", number, err)
	}
	return nil
}

// ClosePull closes a pull request without merging it.
func ClosePull(ctx context.Context, c *gh.Client, owner, repo string, number int64) error {
	if _, _, err := c.PullRequests.Edit(ctx, owner, repo, int(number), &gh.PullRequest{State: gh.String("closed")}); err != nil {
		return fmt.Errorf("close pull request #%d: %w", number, err)
	}
	return nil
}

// comment adds a comment to a pull request's conversation.
func comment(ctx context.Context, c *gh.Client, owner, repo string, number int64, body string) error {
	if _, _, err := c.Issues.CreateComment(ctx, owner, repo, int(number), &gh.IssueComment{Body: gh.String(body)}); err != nil {
		return fmt.Errorf("comment on #%d: %w", number, err)
	}
	return nil
}

// ReplyMarker is the hidden line in the App's reply to a comment that names the
// comment it answers, so that CommentOnce finds a reply GitHub made but whose answer
// was lost instead of posting it twice.
func ReplyMarker(commentID int64) string {
	return "<!-- kukie-reply-to: " + strconv.FormatInt(commentID, 10) + " -->"
}

// CommentOnce adds body, followed by marker, to a pull request's conversation unless
// a comment by author (the App's bot login) carrying marker is already there. Anyone
// can write the marker into a comment of their own, so without an author there is no
// telling a reply that was made from a planted one: that is refused. The
// conversation on GitHub is the one record of whether a reply was made: a create
// whose answer was lost (a timeout, a reset connection, a 5xx after GitHub made the
// comment) did make it, and a note in the store, written before the create or after
// its answer, would be wrong in one of those cases, whichever replica or restart
// takes the retry. since, when not zero, is when the comment being answered was made:
// a reply to it cannot be older, so only comments updated since then are read.
// Two calls with one marker at the same time can both post; callers serialize them
// (a delivery belongs to one worker at a time).
func CommentOnce(ctx context.Context, c *gh.Client, owner, repo string, number int64, author string, since time.Time, marker, body string) error {
	if author == "" {
		return fmt.Errorf("comment on #%d: no author to tell the App's own replies by", number)
	}
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	if !since.IsZero() {
		// GitHub's timestamps are whole seconds: a reply made within the second of
		// the comment it answers is kept whether GitHub compares inclusively or not.
		from := since.Add(-time.Second)
		opts.Since = &from
	}
	for {
		comments, resp, err := c.Issues.ListComments(ctx, owner, repo, int(number), opts)
		if err != nil {
			return fmt.Errorf("list comments of #%d: %w", number, err)
		}
		for _, cm := range comments {
			if strings.EqualFold(cm.GetUser().GetLogin(), author) && strings.Contains(cm.GetBody(), marker) {
				return nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return comment(ctx, c, owner, repo, number, body+"\n\n"+marker)
}

// CanWrite reports whether login may push to the repository (write, maintain or admin).
func CanWrite(ctx context.Context, c *gh.Client, owner, repo, login string) (bool, error) {
	perm, _, err := c.Repositories.GetPermissionLevel(ctx, owner, repo, login)
	if err != nil {
		return false, fmt.Errorf("read permission of %s: %w", login, err)
	}
	switch perm.GetPermission() {
	case "admin", "maintain", "write":
		return true, nil
	}
	return false, nil
}
