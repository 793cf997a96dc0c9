package handler

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/textcut"
)

// The handlers decode only the fields they read, into the small types below. GitHub
// adds fields to its payloads and fills some with values a decoder of the whole
// event rejects (check_run payloads carry app.created_at as "2018-04-25 20:42:10"):
// decoding everything would park a delivery for a field no handler looks at.
// Objects a handler acts on are pointers, so a signed payload without one is told
// apart from an empty one and skipped with a reason (see Skip) instead of acted on.

type userRef struct {
	ID    int64  `json:"id"`
	Login string `json:"login"`
}

type repoRef struct {
	ID       int64  `json:"id"`
	FullName string `json:"full_name"`
}

type installationRef struct {
	ID      int64   `json:"id"`
	Account userRef `json:"account"`
}

// The fields of each event the handlers read.

type checkRunEvent struct {
	Action   string `json:"action"`
	CheckRun *struct {
		Name       string `json:"name"`
		ExternalID string `json:"external_id"`
		HeadSHA    string `json:"head_sha"`
	} `json:"check_run"`
	RequestedAction *struct {
		Identifier string `json:"identifier"`
	} `json:"requested_action"`
	Repo         repoRef         `json:"repository"`
	Installation installationRef `json:"installation"`
	Sender       userRef         `json:"sender"`
}

type checkSuiteEvent struct {
	Action     string `json:"action"`
	CheckSuite *struct {
		HeadBranch string `json:"head_branch"`
		HeadSHA    string `json:"head_sha"`
		// PullRequests lists the open pull requests of the head, those from forks
		// left out (as GitHub does).
		PullRequests []struct {
			Number int64 `json:"number"`
		} `json:"pull_requests"`
	} `json:"check_suite"`
	Repo         repoRef         `json:"repository"`
	Installation installationRef `json:"installation"`
	Sender       userRef         `json:"sender"`
}

type branchRef struct {
	Ref  string  `json:"ref"`
	SHA  string  `json:"sha"`
	Repo repoRef `json:"repo"`
}

type pullRequestEvent struct {
	Action      string `json:"action"`
	PullRequest *struct {
		Number         int64     `json:"number"`
		Merged         bool      `json:"merged"`
		MergeCommitSHA string    `json:"merge_commit_sha"`
		Head           branchRef `json:"head"`
		Base           branchRef `json:"base"`
	} `json:"pull_request"`
	// Changes says, for the edited action, what the edit changed; only a new base
	// branch is read.
	Changes *struct {
		Base *struct {
			Ref struct {
				From string `json:"from"`
			} `json:"ref"`
		} `json:"base"`
	} `json:"changes"`
	Repo         repoRef         `json:"repository"`
	Installation installationRef `json:"installation"`
	Sender       userRef         `json:"sender"`
}

type mergeGroupEvent struct {
	Action     string `json:"action"`
	MergeGroup *struct {
		HeadSHA string `json:"head_sha"`
		HeadRef string `json:"head_ref"`
		BaseSHA string `json:"base_sha"`
		BaseRef string `json:"base_ref"`
	} `json:"merge_group"`
	Repo         repoRef         `json:"repository"`
	Installation installationRef `json:"installation"`
	Sender       userRef         `json:"sender"`
}

type pushCommit struct {
	Added    []string `json:"added"`
	Modified []string `json:"modified"`
	Removed  []string `json:"removed"`
}

type pushEvent struct {
	Installation installationRef `json:"installation"`
	Ref          string          `json:"ref"`
	Before       string          `json:"before"`
	After        string          `json:"after"`
	Deleted      bool            `json:"deleted"`
	Forced       bool            `json:"forced"`
	Commits      []pushCommit    `json:"commits"`
	Repo         *pushRepoRef    `json:"repository"`
}

// pushRepoRef is a push's repository, which names its default branch.
type pushRepoRef struct {
	repoRef
	DefaultBranch string `json:"default_branch"`
}

type issueCommentEvent struct {
	Action string `json:"action"`
	Issue  *struct {
		Number int64 `json:"number"`
		// PullRequest is present only on the issue of a pull request.
		PullRequest json.RawMessage `json:"pull_request"`
	} `json:"issue"`
	Comment struct {
		// ID names the comment a reply answers (see IssueComment.reply).
		ID int64 `json:"id"`
		// CreatedAt is kept as text and read by commentedAt: a time in another
		// layout must not park the delivery, it only widens the search for a reply.
		CreatedAt string  `json:"created_at"`
		Body      string  `json:"body"`
		User      userRef `json:"user"`
	} `json:"comment"`
	Repo   repoRef `json:"repository"`
	Sender userRef `json:"sender"`
}

// commentedAt is when the comment was made, or the zero time when the payload's
// created_at is not an RFC 3339 time.
func (e *issueCommentEvent) commentedAt() time.Time {
	t, err := time.Parse(time.RFC3339, e.Comment.CreatedAt)
	if err != nil {
		return time.Time{}
	}
	return t
}

type installationEvent struct {
	Action       string           `json:"action"`
	Installation *installationRef `json:"installation"`
	// Repositories is nil when the payload has no list, which is not an empty list.
	Repositories []repoRef `json:"repositories"`
	Sender       userRef   `json:"sender"`
	// Requester is the member whose request an owner approved ("created" only).
	Requester *userRef `json:"requester"`
}

type installationRepositoriesEvent struct {
	Action              string           `json:"action"`
	Installation        *installationRef `json:"installation"`
	RepositoriesAdded   []repoRef        `json:"repositories_added"`
	RepositoriesRemoved []repoRef        `json:"repositories_removed"`
	Sender              userRef          `json:"sender"`
}

// payloadCheck checks the values of a payload that a handler is about to act on.
// GitHub always sends them; a payload without one (or with a wrong one) is never
// made right by a retry, as the same bytes are decoded on every attempt, and acting
// on its zero value would reach the wrong thing (a store filter on repository ""
// or pull request 0 matches every plan). Such a delivery fails at once, its error
// naming the field: "invalid push event payload: after "" is not a commit SHA".
// The first fault found is the one named.
type payloadCheck struct {
	event string
	err   error
}

func checkPayload(eventType string) *payloadCheck { return &payloadCheck{event: eventType} }

func (c *payloadCheck) fail(field, format string, args ...any) {
	if c.err == nil {
		c.err = Permanent(fmt.Errorf("invalid %s event payload: %s %s", c.event, field, fmt.Sprintf(format, args...)))
	}
}

// Err is the first fault found, marked Permanent, or nil.
func (c *payloadCheck) Err() error { return c.err }

// repo returns the key of the repository field names ("owner/name" in lower case).
func (c *payloadCheck) repo(field string, r repoRef) string {
	name, err := github.ParseFullName(r.FullName)
	if err != nil {
		c.fail(field+".full_name", "%q is not a repository's owner/name", shown(r.FullName))
	}
	return name
}

// number checks a pull request number or an ID, which GitHub counts from 1.
func (c *payloadCheck) number(field string, n int64) {
	if n <= 0 {
		c.fail(field, "%d is not positive", n)
	}
}

// sha checks a commit SHA: 40 lower-case hexadecimal digits, as GitHub writes them.
func (c *payloadCheck) sha(field, sha string) {
	if !isCommitSHA(sha) {
		c.fail(field, "%q is not a commit SHA (40 hexadecimal digits)", shown(sha))
	}
}

// text checks a value that must not be empty, such as a branch or a login.
func (c *payloadCheck) text(field, s string) {
	if s == "" {
		c.fail(field, "is empty")
	}
}

func isCommitSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// shown is a payload's value as an error names it: its first 100 bytes, so a
// value of megabytes does not become the error.
func shown(s string) string { return textcut.Cut(s, 100) }

// shownError is err's text cut to its first 300 bytes.
func shownError(err error) string { return textcut.Cut(err.Error(), 300) }
