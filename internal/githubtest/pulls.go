package githubtest

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-github/v62/github"
)

// MergeMethod is how Merge combines a pull request into its base.
type MergeMethod string

// Merge methods GitHub offers (rebase is not modelled).
const (
	MergeCommit MergeMethod = "merge"
	Squash      MergeMethod = "squash"
)

type pull struct {
	id     int64
	number int
	title  string
	body   string
	state  string // open, closed
	draft  bool
	head   string // branch in the same repository, or in fork
	// fork, when set, is the owner of the fork the head branch lives in; GitHub
	// keeps the head commit in the base repository as refs/pull/<number>/head.
	fork      *account
	base      string
	headSHA   string
	baseSHA   string
	user      *account
	createdAt time.Time
	updatedAt time.Time
	closedAt  *time.Time

	merged         bool
	mergedAt       *time.Time
	mergedBy       *account
	mergeCommitSHA string
}

var (
	readPulls  = need(PermRead, "pull_requests")
	writePulls = need(PermWrite, "pull_requests")
)

func (s *Server) pullRoutes() []route {
	return []route{
		{pattern: "POST /repos/{owner}/{repo}/pulls", doc: "/pulls/pulls#create-a-pull-request", handler: onRepoWithBody(s, writePulls, s.handleCreatePull)},
		{pattern: "GET /repos/{owner}/{repo}/pulls", doc: "/pulls/pulls#list-pull-requests", handler: s.onRepo(readPulls, s.handleListPulls)},
		{pattern: "GET /repos/{owner}/{repo}/pulls/{number}", doc: "/pulls/pulls#get-a-pull-request", handler: s.onRepo(readPulls, s.handleGetPull)},
		{pattern: "PATCH /repos/{owner}/{repo}/pulls/{number}", doc: "/pulls/pulls#update-a-pull-request", handler: onRepoWithBody(s, writePulls, s.handleUpdatePull)},
		{pattern: "GET /repos/{owner}/{repo}/pulls/{number}/files", doc: "/pulls/pulls#list-pull-requests-files", handler: s.onRepo(readPulls, s.handlePullFiles)},
	}
}

// pullFromPath finds the pull request the path's {number} names, or answers 404 and
// returns nil.
func (s *Server) pullFromPath(w http.ResponseWriter, r *http.Request, rp *repo) *pull {
	var pr *pull
	if n, err := strconv.Atoi(r.PathValue("number")); err == nil {
		pr = rp.pullNumber(n)
	}
	return found(w, r, pr)
}

// headRef is where the base repository holds the pull request's head: its branch,
// or for a fork's pull request refs/pull/<number>/head.
func (pr *pull) headRef() plumbing.ReferenceName {
	if pr.fork != nil {
		return plumbing.ReferenceName(fmt.Sprintf("refs/pull/%d/head", pr.number))
	}
	return plumbing.NewBranchReferenceName(pr.head)
}

func (rp *repo) pullNumber(n int) *pull {
	for _, pr := range rp.pulls {
		if pr.number == n {
			return pr
		}
	}
	return nil
}

// liveSHAs refreshes an open pull request's head and base SHAs from the branches.
func (rp *repo) liveSHAs(pr *pull) {
	if pr.state != "open" {
		return
	}
	if h, ok := rp.refHash(pr.headRef()); ok {
		pr.headSHA = h.String()
	}
	if h, ok := rp.refHash(plumbing.NewBranchReferenceName(pr.base)); ok {
		pr.baseSHA = h.String()
	}
}

// mergeTree runs a real three-way merge of head into base and returns the resulting
// tree, or ok=false when it conflicts; a merge of two commits is run once.
func (rp *repo) mergeTree(base, head string) (plumbing.Hash, bool, error) {
	key := base + "..." + head
	rp.memo.Lock()
	m, ok := rp.memo.merges[key]
	rp.memo.Unlock()
	if ok {
		return m.tree, m.clean, nil
	}
	tree, clean, err := rp.computeMergeTree(base, head)
	if err == nil && hexSHA.MatchString(base) && hexSHA.MatchString(head) && len(base) == 40 && len(head) == 40 {
		rp.memo.Lock()
		if rp.memo.merges == nil {
			rp.memo.merges = map[string]mergeResult{}
		}
		rp.memo.merges[key] = mergeResult{tree, clean}
		rp.memo.Unlock()
	}
	return tree, clean, err
}

// computeMergeTree merges head into base without touching a work tree: the
// tree of the merge and whether it is free of conflicts.
func (rp *repo) computeMergeTree(base, head string) (plumbing.Hash, bool, error) {
	out, err := rp.gitCLI("merge-tree", "--write-tree", "--no-messages", base, head)
	line, _, _ := strings.Cut(out, "\n")
	if err != nil {
		if hexSHA.MatchString(line) && len(line) == 40 {
			return plumbing.ZeroHash, false, nil // exit 1 with a tree: conflicts
		}
		return plumbing.ZeroHash, false, err
	}
	return plumbing.NewHash(strings.TrimSpace(line)), true, nil
}

func (s *Server) pullJSON(rp *repo, pr *pull) *github.PullRequest {
	rp.liveSHAs(pr)
	full := rp.fullName()
	repoJSON := s.repoJSON(rp)
	out := &github.PullRequest{
		ID:                  ptr(pr.id),
		NodeID:              ptr(nodeID("PullRequest", pr.id)),
		Number:              ptr(pr.number),
		State:               ptr(pr.state),
		Locked:              ptr(false),
		Title:               ptr(pr.title),
		Body:                ptr(pr.body),
		CreatedAt:           ts(pr.createdAt),
		UpdatedAt:           ts(pr.updatedAt),
		User:                s.userJSON(pr.user),
		Draft:               ptr(pr.draft),
		Merged:              ptr(pr.merged),
		URL:                 ptr(s.apiURL("repos/%s/pulls/%d", full, pr.number)),
		HTMLURL:             ptr(s.htmlURL("%s/pull/%d", full, pr.number)),
		IssueURL:            ptr(s.apiURL("repos/%s/issues/%d", full, pr.number)),
		DiffURL:             ptr(s.htmlURL("%s/pull/%d.diff", full, pr.number)),
		PatchURL:            ptr(s.htmlURL("%s/pull/%d.patch", full, pr.number)),
		CommitsURL:          ptr(s.apiURL("repos/%s/pulls/%d/commits", full, pr.number)),
		CommentsURL:         ptr(s.apiURL("repos/%s/issues/%d/comments", full, pr.number)),
		MaintainerCanModify: ptr(false),
		AuthorAssociation:   ptr("NONE"),
		Head: &github.PullRequestBranch{
			Label: ptr(rp.owner.login + ":" + pr.head),
			Ref:   ptr(pr.head),
			SHA:   ptr(pr.headSHA),
			Repo:  repoJSON,
			User:  s.userJSON(rp.owner),
		},
		Base: &github.PullRequestBranch{
			Label: ptr(rp.owner.login + ":" + pr.base),
			Ref:   ptr(pr.base),
			SHA:   ptr(pr.baseSHA),
			Repo:  repoJSON,
			User:  s.userJSON(rp.owner),
		},
	}
	if pr.fork != nil {
		fork := *repoJSON
		fork.ID, fork.Name, fork.FullName = ptr(rp.id+1_000_000), ptr(rp.name), ptr(pr.fork.login+"/"+rp.name)
		fork.Owner, fork.Fork = s.userJSON(pr.fork), ptr(true)
		fork.URL, fork.HTMLURL = ptr(s.apiURL("repos/%s/%s", pr.fork.login, rp.name)), ptr(s.htmlURL("%s/%s", pr.fork.login, rp.name))
		out.Head.Label, out.Head.Repo, out.Head.User = ptr(pr.fork.login+":"+pr.head), &fork, s.userJSON(pr.fork)
	}
	if pr.closedAt != nil {
		out.ClosedAt = ts(*pr.closedAt)
	}
	if pr.merged {
		out.MergedAt = ts(*pr.mergedAt)
		out.MergedBy = s.userJSON(pr.mergedBy)
		out.MergeCommitSHA = ptr(pr.mergeCommitSHA)
	}
	if pr.state == "open" {
		_, clean, err := rp.mergeTree(pr.baseSHA, pr.headSHA)
		if err == nil {
			out.Mergeable = ptr(clean)
			out.Rebaseable = ptr(clean)
			out.MergeableState = ptr(map[bool]string{true: "clean", false: "dirty"}[clean])
		}
	}
	if base, err := rp.resolveCommit(pr.baseSHA); err == nil {
		if head, err := rp.resolveCommit(pr.headSHA); err == nil {
			if cmp, err := s.compareJSON(rp, base, head); err == nil {
				add, del := 0, 0
				for _, f := range cmp.Files {
					add += f.GetAdditions()
					del += f.GetDeletions()
				}
				out.Commits = ptr(cmp.GetTotalCommits())
				out.Additions, out.Deletions, out.ChangedFiles = ptr(add), ptr(del), ptr(len(cmp.Files))
			}
		}
	}
	comments := 0
	for _, c := range rp.comments {
		if c.number == pr.number {
			comments++
		}
	}
	out.Comments = ptr(comments)
	return out
}

type createPullRequest struct {
	Title *string `json:"title"`
	Head  *string `json:"head"`
	Base  *string `json:"base"`
	Body  *string `json:"body"`
	Draft bool    `json:"draft"`
}

func (s *Server) handleCreatePull(w http.ResponseWriter, r *http.Request, rp *repo, req *createPullRequest) {
	if !requireFields(w, r, field{"head", req.Head != nil}, field{"base", req.Base != nil}) {
		return
	}
	switch {
	case req.Title == nil || *req.Title == "":
		writeValidation(w, r, fieldError{Resource: "PullRequest", Field: "title", Code: "missing_field"})
		return
	}
	head := *req.Head
	if owner, branch, ok := strings.Cut(head, ":"); ok {
		if !strings.EqualFold(owner, rp.owner.login) {
			writeValidation(w, r, fieldError{Resource: "PullRequest", Field: "head", Code: "invalid"})
			return
		}
		head = branch
	}
	headHash, ok := rp.refHash(plumbing.NewBranchReferenceName(head))
	if !ok {
		writeValidation(w, r, fieldError{Resource: "PullRequest", Field: "head", Code: "invalid"})
		return
	}
	baseHash, ok := rp.refHash(plumbing.NewBranchReferenceName(*req.Base))
	if !ok {
		writeValidation(w, r, fieldError{Resource: "PullRequest", Field: "base", Code: "invalid"})
		return
	}
	for _, pr := range rp.pulls {
		if pr.state == "open" && pr.head == head && pr.base == *req.Base {
			writeValidation(w, r, fieldError{Resource: "PullRequest", Code: "custom",
				Message: fmt.Sprintf("A pull request already exists for %s:%s.", rp.owner.login, head)})
			return
		}
	}
	if rp.isAncestor(headHash, baseHash) {
		writeValidation(w, r, fieldError{Resource: "PullRequest", Code: "custom",
			Message: fmt.Sprintf("No commits between %s and %s", *req.Base, head)})
		return
	}
	pr := s.openPullLocked(rp, head, *req.Base, *req.Title, deref(req.Body), req.Draft, s.botLocked())
	writeJSON(w, http.StatusCreated, s.pullJSON(rp, pr))
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *Server) openPullLocked(rp *repo, head, base, title, body string, draft bool, user *account) *pull {
	now := s.clock.Now()
	rp.nextNumber++
	pr := &pull{
		id:        s.newID(),
		number:    rp.nextNumber,
		title:     title,
		body:      body,
		state:     "open",
		draft:     draft,
		head:      head,
		base:      base,
		user:      user,
		createdAt: now,
		updatedAt: now,
	}
	rp.liveSHAs(pr)
	rp.pulls = append(rp.pulls, pr)
	s.firePullLocked(rp, pr, "opened", user, nil)
	return pr
}

func (s *Server) firePullLocked(rp *repo, pr *pull, action string, sender *account, extra func(*github.PullRequestEvent)) <-chan struct{} {
	ev := &github.PullRequestEvent{
		Action:      ptr(action),
		Number:      ptr(pr.number),
		PullRequest: s.pullJSON(rp, pr),
		Repo:        s.repoJSON(rp),
		Sender:      s.userJSON(sender),
	}
	if extra != nil {
		extra(ev)
	}
	return s.repoEventLocked(rp, "pull_request", func(inst *github.Installation) any {
		ev.Installation = inst
		return ev
	})
}

func (s *Server) handleListPulls(w http.ResponseWriter, r *http.Request, rp *repo) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "closed" && state != "all" {
		writeValidation(w, r, fieldError{Resource: "PullRequest", Field: "state", Code: "invalid"})
		return
	}
	headFilter := q.Get("head")
	var matches []*pull
	for _, pr := range rp.pulls {
		if state != "all" && pr.state != state {
			continue
		}
		if b := q.Get("base"); b != "" && pr.base != b {
			continue
		}
		if headFilter != "" {
			owner, branch, ok := strings.Cut(headFilter, ":")
			if !ok {
				owner, branch = headFilter, ""
			}
			if !strings.EqualFold(owner, rp.owner.login) || (branch != "" && branch != pr.head) {
				continue
			}
		}
		matches = append(matches, pr)
	}
	desc := q.Get("direction") != "asc"
	sort.SliceStable(matches, func(i, j int) bool {
		if desc {
			return matches[i].number > matches[j].number
		}
		return matches[i].number < matches[j].number
	})
	start, end := paginate(w, r, len(matches))
	out := []*github.PullRequest{}
	for _, pr := range matches[start:end] {
		out = append(out, s.pullJSON(rp, pr))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleGetPull(w http.ResponseWriter, r *http.Request, rp *repo) {
	pr := s.pullFromPath(w, r, rp)
	if pr == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.pullJSON(rp, pr))
}

type updatePullRequest struct {
	Title *string `json:"title"`
	Body  *string `json:"body"`
	State *string `json:"state"`
	Base  *string `json:"base"`
}

func (s *Server) handleUpdatePull(w http.ResponseWriter, r *http.Request, rp *repo, req *updatePullRequest) {
	pr := s.pullFromPath(w, r, rp)
	if pr == nil {
		return
	}
	if req.State != nil && *req.State != "open" && *req.State != "closed" {
		writeValidation(w, r, fieldError{Resource: "PullRequest", Field: "state", Code: "invalid"})
		return
	}
	if req.Base != nil {
		if _, ok := rp.refHash(plumbing.NewBranchReferenceName(*req.Base)); !ok {
			writeValidation(w, r, fieldError{Resource: "PullRequest", Field: "base", Code: "invalid"})
			return
		}
	}
	if req.State != nil && *req.State == "open" && pr.merged {
		writeValidation(w, r, fieldError{Resource: "PullRequest", Code: "custom", Message: "state cannot be changed. The pull request has been merged."})
		return
	}
	bot := s.botLocked()
	edited := false
	var changes github.EditChange
	if req.Title != nil && *req.Title != pr.title {
		pr.title, edited = *req.Title, true
	}
	if req.Body != nil && *req.Body != pr.body {
		pr.body, edited = *req.Body, true
	}
	if req.Base != nil && *req.Base != pr.base {
		changes.Base = baseChange(rp, pr)
		pr.base, edited = *req.Base, true
	}
	pr.updatedAt = s.clock.Now()
	if edited {
		s.firePullLocked(rp, pr, "edited", bot, func(ev *github.PullRequestEvent) {
			if changes.Base != nil {
				ev.Changes = &changes
			}
		})
	}
	if req.State != nil && *req.State != pr.state {
		if *req.State == "closed" {
			s.closePullLocked(rp, pr, bot)
		} else {
			pr.state, pr.closedAt = "open", nil
			s.firePullLocked(rp, pr, "reopened", bot, nil)
		}
	}
	writeJSON(w, http.StatusOK, s.pullJSON(rp, pr))
}

// closePullLocked closes an open pull request without merging it.
func (s *Server) closePullLocked(rp *repo, pr *pull, sender *account) []<-chan struct{} {
	rp.liveSHAs(pr)
	now := s.clock.Now()
	pr.state, pr.closedAt, pr.updatedAt = "closed", &now, now
	return []<-chan struct{}{s.firePullLocked(rp, pr, "closed", sender, nil)}
}

func (s *Server) handlePullFiles(w http.ResponseWriter, r *http.Request, rp *repo) {
	pr := s.pullFromPath(w, r, rp)
	if pr == nil {
		return
	}
	rp.liveSHAs(pr)
	base, errBase := rp.resolveCommit(pr.baseSHA)
	head, errHead := rp.resolveCommit(pr.headSHA)
	if errBase != nil || errHead != nil {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return
	}
	cmp, err := s.compareJSON(rp, base, head)
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	start, end := paginate(w, r, len(cmp.Files))
	writeJSON(w, http.StatusOK, cmp.Files[start:end])
}

// --- test-side actions ---

// OpenPullRequest opens a pull request as a person (not the App) would, firing
// pull_request "opened", and returns its number.
func (s *Server) OpenPullRequest(t TB, repoName, head, base, title string, author Author) int {
	t.Helper()
	return s.openPull(t, repoName, head, base, title, author, false)
}

// OpenDraftPullRequest is OpenPullRequest for a draft.
func (s *Server) OpenDraftPullRequest(t TB, repoName, head, base, title string, author Author) int {
	t.Helper()
	return s.openPull(t, repoName, head, base, title, author, true)
}

func (s *Server) openPull(t TB, repoName, head, base, title string, author Author, draft bool) int {
	t.Helper()
	s.mu.Lock()
	rp := s.mustRepoLocked(t, repoName)
	if _, ok := rp.refHash(plumbing.NewBranchReferenceName(head)); !ok {
		s.mu.Unlock()
		t.Fatalf("open pull request: no branch %s", head)
	}
	pr := s.openPullLocked(rp, head, base, title, "", draft, s.personLocked(author))
	s.mu.Unlock()
	s.WaitForDeliveries()
	return pr.number
}

// OpenForkPullRequest opens a pull request from branch of forkOwner's fork of
// repoName into base, as that person would: the fork's commit (files on top of
// base) is kept in the base repository as refs/pull/<number>/head, as GitHub keeps
// it, and head.repo names the fork. It fires pull_request "opened" and returns the
// number.
func (s *Server) OpenForkPullRequest(t TB, repoName, forkOwner, branch, base, title string, files map[string]string) int {
	t.Helper()
	s.mu.Lock()
	rp := s.mustRepoLocked(t, repoName)
	parent, ok := rp.refHash(plumbing.NewBranchReferenceName(base))
	if !ok {
		s.mu.Unlock()
		t.Fatalf("open fork pull request: no branch %s", base)
	}
	author := Author{Login: forkOwner, Name: forkOwner, Email: forkOwner + "@example.com"}
	h, err := s.commitFilesLocked(rp, parent, fileChanges(files), "Update from a fork", author)
	if err != nil {
		s.mu.Unlock()
		t.Fatalf("open fork pull request: %v", err)
	}
	now := s.clock.Now()
	rp.nextNumber++
	person := s.personLocked(author)
	pr := &pull{id: s.newID(), number: rp.nextNumber, title: title, state: "open", head: branch, base: base,
		fork: person, user: person, createdAt: now, updatedAt: now}
	if err := rp.setRef(pr.headRef(), h); err != nil {
		s.mu.Unlock()
		t.Fatalf("open fork pull request: %v", err)
	}
	rp.liveSHAs(pr)
	rp.pulls = append(rp.pulls, pr)
	done := s.firePullLocked(rp, pr, "opened", person, nil)
	s.mu.Unlock()
	<-done
	return pr.number
}

// ReopenPullRequest reopens a closed pull request, as a person would, firing
// pull_request "reopened".
func (s *Server) ReopenPullRequest(t TB, repoName string, number int) {
	t.Helper()
	s.mu.Lock()
	rp := s.mustRepoLocked(t, repoName)
	pr := rp.pullNumber(number)
	if pr == nil || pr.state != "closed" || pr.merged {
		s.mu.Unlock()
		t.Fatalf("reopen %s#%d: not a closed, unmerged pull request", repoName, number)
	}
	pr.state, pr.closedAt, pr.updatedAt = "open", nil, s.clock.Now()
	done := s.firePullLocked(rp, pr, "reopened", s.personLocked(DefaultAuthor), nil)
	s.mu.Unlock()
	<-done
}

// RetargetPullRequest changes an open pull request's base branch as a person does
// on GitHub, firing pull_request "edited" with changes.base naming the old base.
func (s *Server) RetargetPullRequest(t TB, repoName string, number int, base string) {
	t.Helper()
	s.mu.Lock()
	rp, pr := s.mustOpenPullLocked(t, "retarget", repoName, number)
	if _, ok := rp.refHash(plumbing.NewBranchReferenceName(base)); !ok || base == pr.base {
		s.mu.Unlock()
		t.Fatalf("retarget %s#%d: no branch %q, or it is the base already", repoName, number, base)
	}
	changes := &github.EditChange{Base: baseChange(rp, pr)}
	pr.base, pr.updatedAt = base, s.clock.Now()
	done := s.firePullLocked(rp, pr, "edited", s.personLocked(DefaultAuthor), func(ev *github.PullRequestEvent) { ev.Changes = changes })
	s.mu.Unlock()
	<-done
}

// baseChange is the changes.base of an edit that moves pr off its current base.
func baseChange(rp *repo, pr *pull) *github.EditBase {
	from := pr.base
	b := &github.EditBase{Ref: &github.EditRef{From: &from}}
	if h, ok := rp.refHash(plumbing.NewBranchReferenceName(from)); ok {
		b.SHA = &github.EditSHA{From: ptr(h.String())}
	}
	return b
}

// MarkReadyForReview turns a draft pull request into one ready for review, firing
// pull_request "ready_for_review".
func (s *Server) MarkReadyForReview(t TB, repoName string, number int) {
	t.Helper()
	s.mu.Lock()
	rp, pr := s.mustOpenPullLocked(t, "mark ready", repoName, number)
	if !pr.draft {
		s.mu.Unlock()
		t.Fatalf("mark %s#%d ready: not a draft", repoName, number)
	}
	pr.draft, pr.updatedAt = false, s.clock.Now()
	done := s.firePullLocked(rp, pr, "ready_for_review", s.personLocked(DefaultAuthor), nil)
	s.mu.Unlock()
	<-done
}

// PullRequests returns the repository's pull requests (all states), oldest first.
func (s *Server) PullRequests(t TB, repoName string) []*github.PullRequest {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepoLocked(t, repoName)
	out := []*github.PullRequest{}
	for _, pr := range rp.pulls {
		out = append(out, s.pullJSON(rp, pr))
	}
	return out
}

// Merge merges pull request number as a person pressing the button would (a merge
// commit or a squash, made with real git), moves the base branch, and fires push (to
// the base) and pull_request "closed" with merged=true. It returns the new base SHA.
func (s *Server) Merge(t TB, repoName string, number int, method MergeMethod) string {
	t.Helper()
	s.mu.Lock()
	rp, pr := s.mustOpenPullLocked(t, "merge", repoName, number)
	sha, done, err := s.mergeLocked(rp, pr, method, s.personLocked(DefaultAuthor))
	s.mu.Unlock()
	if err != nil {
		t.Fatalf("merge %s#%d: %v", repoName, number, err)
	}
	waitAll(done)
	return sha
}

func (s *Server) mergeLocked(rp *repo, pr *pull, method MergeMethod, by *account) (string, []<-chan struct{}, error) {
	rp.liveSHAs(pr)
	tree, clean, err := rp.mergeTree(pr.baseSHA, pr.headSHA)
	if err != nil {
		return "", nil, err
	}
	if !clean {
		return "", nil, fmt.Errorf("merge conflict between %s and %s", pr.base, pr.head)
	}
	base := plumbing.NewHash(pr.baseSHA)
	head := plumbing.NewHash(pr.headSHA)
	now := s.clock.Now()
	author := object.Signature{Name: by.login, Email: fmt.Sprintf("%d+%s@users.noreply.github.com", by.id, by.login), When: now}
	c := &object.Commit{
		Author:    author,
		Committer: object.Signature{Name: "GitHub", Email: "noreply@github.com", When: now},
		TreeHash:  tree,
	}
	switch method {
	case MergeCommit:
		c.ParentHashes = []plumbing.Hash{base, head}
		c.Message = fmt.Sprintf("Merge pull request #%d from %s/%s\n\n%s", pr.number, rp.owner.login, pr.head, pr.title)
	case Squash:
		c.ParentHashes = []plumbing.Hash{base}
		c.Message = fmt.Sprintf("%s (#%d)", pr.title, pr.number)
		if pr.body != "" {
			c.Message += "\n\n" + pr.body
		}
	default:
		return "", nil, fmt.Errorf("unknown merge method %q", method)
	}
	h, err := rp.writeCommit(c)
	if err != nil {
		return "", nil, err
	}
	s.verifiedCommits[h.String()] = true
	if err := rp.setRef(plumbing.NewBranchReferenceName(pr.base), h); err != nil {
		return "", nil, err
	}
	pr.state, pr.merged, pr.mergedBy, pr.mergeCommitSHA = "closed", true, by, h.String()
	pr.closedAt, pr.mergedAt, pr.updatedAt = &now, &now, now
	done := s.refUpdatedLocked(rp, plumbing.NewBranchReferenceName(pr.base), base, h, false, by)
	done = append(done, s.firePullLocked(rp, pr, "closed", by, nil))
	return h.String(), done, nil
}

// mustOpenPullLocked returns the open pull request number of repoName; when there is
// none it releases s.mu and fails the test, naming what the caller meant to do.
func (s *Server) mustOpenPullLocked(t TB, verb, repoName string, number int) (*repo, *pull) {
	t.Helper()
	rp := s.mustRepoLocked(t, repoName)
	pr := rp.pullNumber(number)
	if pr == nil || pr.state != "open" {
		s.mu.Unlock()
		t.Fatalf("%s %s#%d: no open pull request", verb, repoName, number)
	}
	return rp, pr
}

// ClosePullRequest closes a pull request without merging, as a person would, and fires
// pull_request "closed" (merged=false).
func (s *Server) ClosePullRequest(t TB, repoName string, number int) {
	t.Helper()
	s.mu.Lock()
	rp, pr := s.mustOpenPullLocked(t, "close", repoName, number)
	done := s.closePullLocked(rp, pr, s.personLocked(DefaultAuthor))
	s.mu.Unlock()
	waitAll(done)
}

// PushCommit commits files (path → content) on top of branch as author, as someone
// pushing from their machine would, creating the branch from the default branch if it
// does not exist. It fires push (and synchronize for pull requests from the branch)
// and returns the new SHA.
func (s *Server) PushCommit(t TB, repoName, branch string, files map[string]string, author Author) string {
	t.Helper()
	return s.push(t, repoName, branch, fileChanges(files), author)
}

// PushSymlinks commits symbolic links (path → target) on top of branch as author,
// as PushCommit commits files.
func (s *Server) PushSymlinks(t TB, repoName, branch string, links map[string]string, author Author) string {
	t.Helper()
	changes := fileChanges(links)
	for i := range changes {
		changes[i].link = true
	}
	return s.push(t, repoName, branch, changes, author)
}

// DeleteFiles commits the removal of paths on branch as author and fires the same
// events as PushCommit.
func (s *Server) DeleteFiles(t TB, repoName, branch string, author Author, paths ...string) string {
	t.Helper()
	var changes []fileChange
	for _, p := range paths {
		changes = append(changes, fileChange{path: p})
	}
	return s.push(t, repoName, branch, changes, author)
}

func (s *Server) push(t TB, repoName, branch string, changes []fileChange, author Author) string {
	t.Helper()
	s.mu.Lock()
	rp := s.mustRepoLocked(t, repoName)
	name := plumbing.NewBranchReferenceName(branch)
	before, exists := rp.refHash(name)
	parent := before
	if !exists {
		parent, _ = rp.refHash(plumbing.NewBranchReferenceName(rp.defaultBranch))
	}
	msg := "Update " + changes[0].path
	if len(changes) > 1 {
		msg = fmt.Sprintf("Update %d files", len(changes))
	}
	h, err := s.commitFilesLocked(rp, parent, changes, msg, author)
	if err == nil {
		err = rp.setRef(name, h)
	}
	if err != nil {
		s.mu.Unlock()
		t.Fatalf("push to %s %s: %v", repoName, branch, err)
	}
	if !exists {
		before = plumbing.ZeroHash
	}
	done := s.refUpdatedLocked(rp, name, before, h, false, s.personLocked(author))
	s.mu.Unlock()
	waitAll(done)
	return h.String()
}

// personLocked is the GitHub user behind an Author.
func (s *Server) personLocked(a Author) *account {
	login := a.Login
	if login == "" {
		login = "octocat"
	}
	return s.accountLocked(login, "User")
}
