package githubtest

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/go-github/v62/github"
)

// maxCommentBody is GitHub's limit on an issue comment's body.
const maxCommentBody = 65536

type issueComment struct {
	id        int64
	number    int
	body      string
	user      *account
	createdAt time.Time
	updatedAt time.Time
}

// Issue comments on pull requests need either permission.
var (
	readComments  = need(PermRead, "issues", "pull_requests")
	writeComments = need(PermWrite, "issues", "pull_requests")
)

func (s *Server) commentRoutes() []route {
	return []route{
		{pattern: "POST /repos/{owner}/{repo}/issues/{number}/comments", doc: "/issues/comments#create-an-issue-comment", handler: onRepoWithBody(s, writeComments, s.handleCreateComment)},
		{pattern: "GET /repos/{owner}/{repo}/issues/{number}/comments", doc: "/issues/comments#list-issue-comments", handler: s.onRepo(readComments, s.handleListComments)},
		{pattern: "PATCH /repos/{owner}/{repo}/issues/comments/{id}", doc: "/issues/comments#update-an-issue-comment", handler: onRepoWithBody(s, writeComments, s.handleUpdateComment)},
	}
}

func (s *Server) commentJSON(rp *repo, c *issueComment) *github.IssueComment {
	full := rp.fullName()
	return &github.IssueComment{
		ID:                ptr(c.id),
		NodeID:            ptr(nodeID("IssueComment", c.id)),
		Body:              ptr(c.body),
		User:              s.userJSON(c.user),
		CreatedAt:         ts(c.createdAt),
		UpdatedAt:         ts(c.updatedAt),
		AuthorAssociation: ptr("NONE"),
		URL:               ptr(s.apiURL("repos/%s/issues/comments/%d", full, c.id)),
		HTMLURL:           ptr(s.htmlURL("%s/pull/%d#issuecomment-%d", full, c.number, c.id)),
		IssueURL:          ptr(s.apiURL("repos/%s/issues/%d", full, c.number)),
	}
}

func validCommentBody(w http.ResponseWriter, r *http.Request, body *string) bool {
	if !requireFields(w, r, field{"body", body != nil}) {
		return false
	}
	if utf8.RuneCountInString(*body) > maxCommentBody {
		writeValidation(w, r, fieldError{Resource: "IssueComment", Field: "data", Code: "unprocessable",
			Message: fmt.Sprintf("Body is too long (maximum is %d characters)", maxCommentBody)})
		return false
	}
	return true
}

type createCommentRequest struct {
	Body *string `json:"body"`
}

func (s *Server) handleCreateComment(w http.ResponseWriter, r *http.Request, rp *repo, req *createCommentRequest) {
	pr := s.pullFromPath(w, r, rp)
	if pr == nil {
		return
	}
	if !validCommentBody(w, r, req.Body) {
		return
	}
	c := s.addCommentLocked(rp, pr, *req.Body, s.botLocked())
	writeJSON(w, http.StatusCreated, s.commentJSON(rp, c))
}

func (s *Server) addCommentLocked(rp *repo, pr *pull, body string, user *account) *issueComment {
	now := s.clock.Now()
	c := &issueComment{id: s.newID(), number: pr.number, body: body, user: user, createdAt: now, updatedAt: now}
	rp.comments = append(rp.comments, c)
	s.fireCommentLocked(rp, pr, c, "created")
	return c
}

func (s *Server) fireCommentLocked(rp *repo, pr *pull, c *issueComment, action string) <-chan struct{} {
	full := rp.fullName()
	state := pr.state
	ev := &github.IssueCommentEvent{
		Action: ptr(action),
		Issue: &github.Issue{
			ID:        ptr(pr.id),
			NodeID:    ptr(nodeID("PullRequest", pr.id)),
			Number:    ptr(pr.number),
			Title:     ptr(pr.title),
			Body:      ptr(pr.body),
			State:     ptr(state),
			User:      s.userJSON(pr.user),
			URL:       ptr(s.apiURL("repos/%s/issues/%d", full, pr.number)),
			HTMLURL:   ptr(s.htmlURL("%s/pull/%d", full, pr.number)),
			CreatedAt: ts(pr.createdAt),
			UpdatedAt: ts(pr.updatedAt),
			// The pull_request key is how an issue_comment tells a PR from an issue.
			PullRequestLinks: &github.PullRequestLinks{
				URL:      ptr(s.apiURL("repos/%s/pulls/%d", full, pr.number)),
				HTMLURL:  ptr(s.htmlURL("%s/pull/%d", full, pr.number)),
				DiffURL:  ptr(s.htmlURL("%s/pull/%d.diff", full, pr.number)),
				PatchURL: ptr(s.htmlURL("%s/pull/%d.patch", full, pr.number)),
			},
		},
		Comment: s.commentJSON(rp, c),
		Repo:    s.repoJSON(rp),
		Sender:  s.userJSON(c.user),
	}
	return s.repoEventLocked(rp, "issue_comment", func(inst *github.Installation) any {
		ev.Installation = inst
		return ev
	})
}

func (s *Server) handleListComments(w http.ResponseWriter, r *http.Request, rp *repo) {
	pr := s.pullFromPath(w, r, rp)
	if pr == nil {
		return
	}
	// since keeps the comments updated at or after it; the list is oldest first
	// whatever it is given, as GitHub's takes no sort or direction.
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			writeError(w, r, http.StatusUnprocessableEntity, "The since parameter needs to be in ISO 8601 format: YYYY-MM-DDTHH:MM:SSZ")
			return
		}
		since = t
	}
	out := []*github.IssueComment{}
	for _, c := range rp.comments {
		if c.number == pr.number && !c.updatedAt.Before(since) {
			out = append(out, s.commentJSON(rp, c))
		}
	}
	start, end := paginate(w, r, len(out))
	writeJSON(w, http.StatusOK, out[start:end])
}

// commentFromPath finds the issue comment the path's {id} names, or answers 404 and
// returns nil.
func (rp *repo) commentFromPath(w http.ResponseWriter, r *http.Request) *issueComment {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err == nil {
		for _, c := range rp.comments {
			if c.id == id {
				return c
			}
		}
	}
	return found[issueComment](w, r, nil)
}

type updateCommentRequest struct {
	Body *string `json:"body"`
}

func (s *Server) handleUpdateComment(w http.ResponseWriter, r *http.Request, rp *repo, req *updateCommentRequest) {
	c := rp.commentFromPath(w, r)
	if c == nil {
		return
	}
	if !validCommentBody(w, r, req.Body) {
		return
	}
	c.body, c.updatedAt = *req.Body, s.clock.Now()
	if pr := rp.pullNumber(c.number); pr != nil {
		s.fireCommentLocked(rp, pr, c, "edited")
	}
	writeJSON(w, http.StatusOK, s.commentJSON(rp, c))
}

// CommentOnPullRequest adds a comment as a person (author's login) and fires
// issue_comment "created"; it returns the comment id.
func (s *Server) CommentOnPullRequest(t TB, repoName string, number int, author Author, body string) int64 {
	t.Helper()
	s.mu.Lock()
	rp := s.mustRepoLocked(t, repoName)
	pr := rp.pullNumber(number)
	if pr == nil {
		s.mu.Unlock()
		t.Fatalf("no pull request %s#%d", repoName, number)
	}
	c := s.addCommentLocked(rp, pr, body, s.personLocked(author))
	s.mu.Unlock()
	s.WaitForDeliveries()
	return c.id
}

// IssueComments returns the comments on pull request number, oldest first.
func (s *Server) IssueComments(t TB, repoName string, number int) []*github.IssueComment {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepoLocked(t, repoName)
	out := []*github.IssueComment{}
	for _, c := range rp.comments {
		if c.number == number {
			out = append(out, s.commentJSON(rp, c))
		}
	}
	return out
}
