package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/go-github/v62/github"
)

// GitHub's limits on check run output.
const (
	MaxCheckOutputChars      = 65535
	MaxAnnotationsPerRequest = 50
	MaxCheckActions          = 3
	MaxActionLabel           = 20
	MaxActionDescription     = 40
	MaxActionIdentifier      = 20
)

type checkRun struct {
	id          int64
	name        string
	headSHA     string
	status      string
	conclusion  string
	detailsURL  string
	externalID  string
	startedAt   time.Time
	completedAt *time.Time
	title       *string
	summary     *string
	text        *string
	annotations []*github.CheckRunAnnotation
	actions     []*github.CheckRunAction
	suiteID     int64
}

var (
	readChecks  = need(PermRead, "checks")
	writeChecks = need(PermWrite, "checks")
)

func (s *Server) checkRoutes() []route {
	return []route{
		{pattern: "POST /repos/{owner}/{repo}/check-runs", doc: "/checks/runs#create-a-check-run", handler: onRepoWithBody(s, writeChecks, s.handleCreateCheckRun)},
		{pattern: "PATCH /repos/{owner}/{repo}/check-runs/{id}", doc: "/checks/runs#update-a-check-run", handler: onRepoWithBody(s, writeChecks, s.handleUpdateCheckRun)},
		{pattern: "GET /repos/{owner}/{repo}/check-runs/{id}", doc: "/checks/runs#get-a-check-run", handler: s.onRepo(readChecks, s.handleGetCheckRun)},
		{pattern: "GET /repos/{owner}/{repo}/check-runs/{id}/annotations", doc: "/checks/runs#list-check-run-annotations", handler: s.onRepo(readChecks, s.handleListAnnotations)},
	}
}

// checkRunRequest is the body of create and update. Pointers tell "absent" from
// "empty" so an update only touches what it names.
type checkRunRequest struct {
	Name        *string `json:"name"`
	HeadSHA     *string `json:"head_sha"`
	DetailsURL  *string `json:"details_url"`
	ExternalID  *string `json:"external_id"`
	Status      *string `json:"status"`
	Conclusion  *string `json:"conclusion"`
	StartedAt   *string `json:"started_at"`
	CompletedAt *string `json:"completed_at"`
	Output      *struct {
		Title       *string                      `json:"title"`
		Summary     *string                      `json:"summary"`
		Text        *string                      `json:"text"`
		Annotations []*github.CheckRunAnnotation `json:"annotations"`
		Images      []json.RawMessage            `json:"images"`
	} `json:"output"`
	Actions []*github.CheckRunAction `json:"actions"`
}

var (
	checkStatuses    = []string{"queued", "in_progress", "completed"}
	checkConclusions = []string{"action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out"}
	annotationLevels = []string{"notice", "warning", "failure"}
)

// validate applies GitHub's schema and field limits; it answers the 422 itself and
// returns false on the first violation.
func (req *checkRunRequest) validate(w http.ResponseWriter, r *http.Request) bool {
	if req.Status != nil && !slices.Contains(checkStatuses, *req.Status) {
		writeInvalidRequest(w, r, fmt.Sprintf("%q is not a member of [%q, %q, %q].", *req.Status, "queued", "in_progress", "completed"))
		return false
	}
	if req.Conclusion != nil && !slices.Contains(checkConclusions, *req.Conclusion) {
		writeInvalidRequest(w, r, fmt.Sprintf("%q is not a valid conclusion.", *req.Conclusion))
		return false
	}
	if o := req.Output; o != nil {
		if !requireFields(w, r, field{"title", o.Title != nil}, field{"summary", o.Summary != nil}) {
			return false
		}
		for _, f := range []struct {
			name  string
			value *string
		}{{"title", o.Title}, {"summary", o.Summary}, {"text", o.Text}} {
			if f.value == nil {
				continue
			}
			if n := utf8.RuneCountInString(*f.value); n > MaxCheckOutputChars {
				writeInvalidRequest(w, r, fmt.Sprintf("Only %d characters are allowed; %d were supplied.", MaxCheckOutputChars, n))
				return false
			}
			// GitHub's storage limit is in bytes even though the documentation says
			// characters; multi-byte text can pass the first check and fail here.
			if len(*f.value) > MaxCheckOutputChars {
				writeValidation(w, r, fieldError{Resource: "CheckRun", Code: "custom", Field: f.name,
					Message: fmt.Sprintf("%s exceeds a maximum bytesize of %d", f.name, MaxCheckOutputChars)})
				return false
			}
		}
		if n := len(o.Annotations); n > MaxAnnotationsPerRequest {
			writeInvalidRequest(w, r, fmt.Sprintf("Only %d elements are allowed; %d were supplied.", MaxAnnotationsPerRequest, n))
			return false
		}
		for _, a := range o.Annotations {
			if !requireFields(w, r, field{"path", a.Path != nil}, field{"start_line", a.StartLine != nil}, field{"end_line", a.EndLine != nil}) {
				return false
			}
			if a.AnnotationLevel == nil || !slices.Contains(annotationLevels, *a.AnnotationLevel) {
				writeInvalidRequest(w, r, `"annotation_level" wasn't supplied or is not one of notice, warning, failure.`)
				return false
			}
			if !requireFields(w, r, field{"message", a.Message != nil}) {
				return false
			}
		}
	}
	if n := len(req.Actions); n > MaxCheckActions {
		writeInvalidRequest(w, r, fmt.Sprintf("Only %d elements are allowed; %d were supplied.", MaxCheckActions, n))
		return false
	}
	for _, a := range req.Actions {
		for _, f := range []struct {
			name  string
			value string
			max   int
		}{{"label", a.Label, MaxActionLabel}, {"description", a.Description, MaxActionDescription}, {"identifier", a.Identifier, MaxActionIdentifier}} {
			n := utf8.RuneCountInString(f.value)
			if !requireFields(w, r, field{f.name, n != 0}) {
				return false
			}
			if n > f.max {
				writeInvalidRequest(w, r, fmt.Sprintf("Only %d characters are allowed; %d were supplied.", f.max, n))
				return false
			}
		}
	}
	for _, v := range []*string{req.StartedAt, req.CompletedAt} {
		if v != nil {
			if _, err := time.Parse(time.RFC3339, *v); err != nil {
				writeInvalidRequest(w, r, fmt.Sprintf("%q is not a valid date-time.", *v))
				return false
			}
		}
	}
	return true
}

// apply copies the request onto the run: an output replaces title, summary and text
// but appends annotations, as GitHub does.
func (req *checkRunRequest) apply(run *checkRun, now time.Time) {
	if req.Name != nil {
		run.name = *req.Name
	}
	if req.DetailsURL != nil {
		run.detailsURL = *req.DetailsURL
	}
	if req.ExternalID != nil {
		run.externalID = *req.ExternalID
	}
	if req.StartedAt != nil {
		run.startedAt, _ = time.Parse(time.RFC3339, *req.StartedAt)
	}
	if req.Status != nil {
		run.status = *req.Status
	}
	if req.Conclusion != nil {
		run.conclusion = *req.Conclusion
		run.status = "completed"
	}
	if run.status == "completed" && run.completedAt == nil {
		at := now
		if req.CompletedAt != nil {
			at, _ = time.Parse(time.RFC3339, *req.CompletedAt)
		}
		run.completedAt = &at
	}
	if o := req.Output; o != nil {
		run.title, run.summary, run.text = o.Title, o.Summary, o.Text
		run.annotations = append(run.annotations, o.Annotations...)
	}
	if req.Actions != nil {
		run.actions = req.Actions
	}
}

func (s *Server) handleCreateCheckRun(w http.ResponseWriter, r *http.Request, rp *repo, req *checkRunRequest) {
	if !requireFields(w, r, field{"name", req.Name != nil && *req.Name != ""}, field{"head_sha", req.HeadSHA != nil}) {
		return
	}
	if !req.validate(w, r) {
		return
	}
	if h, ok := rp.existingObject(*req.HeadSHA); !ok || !rp.objectHasType(h, "commit") {
		writeError(w, r, http.StatusUnprocessableEntity, "No commit found for SHA: "+*req.HeadSHA)
		return
	}
	if req.Status != nil && *req.Status == "completed" && req.Conclusion == nil {
		writeValidation(w, r, fieldError{Resource: "CheckRun", Field: "conclusion", Code: "missing_field",
			Message: "conclusion is required when status is completed"})
		return
	}
	now := s.clock.Now()
	run := &checkRun{id: s.newID(), headSHA: *req.HeadSHA, status: "queued", startedAt: now,
		suiteID: s.checkSuiteLocked(rp, *req.HeadSHA)}
	req.apply(run, now)
	rp.checkRuns = append(rp.checkRuns, run)
	s.fireCheckRunLocked(rp, run, "created", s.botLocked(), nil)
	if run.status == "completed" {
		s.fireCheckRunLocked(rp, run, "completed", s.botLocked(), nil)
	}
	writeJSON(w, http.StatusCreated, s.checkRunJSON(rp, run))
}

func (s *Server) handleUpdateCheckRun(w http.ResponseWriter, r *http.Request, rp *repo, req *checkRunRequest) {
	run := rp.checkRunFromPath(w, r)
	if run == nil {
		return
	}
	if !req.validate(w, r) {
		return
	}
	if req.Status != nil && *req.Status == "completed" && req.Conclusion == nil && run.conclusion == "" {
		writeValidation(w, r, fieldError{Resource: "CheckRun", Field: "conclusion", Code: "missing_field",
			Message: "conclusion is required when status is completed"})
		return
	}
	wasCompleted := run.status == "completed"
	req.apply(run, s.clock.Now())
	if run.status == "completed" && !wasCompleted {
		s.fireCheckRunLocked(rp, run, "completed", s.botLocked(), nil)
	}
	writeJSON(w, http.StatusOK, s.checkRunJSON(rp, run))
}

func (s *Server) handleGetCheckRun(w http.ResponseWriter, r *http.Request, rp *repo) {
	run := rp.checkRunFromPath(w, r)
	if run == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.checkRunJSON(rp, run))
}

func (s *Server) handleListAnnotations(w http.ResponseWriter, r *http.Request, rp *repo) {
	run := rp.checkRunFromPath(w, r)
	if run == nil {
		return
	}
	start, end := paginate(w, r, len(run.annotations))
	writeJSON(w, http.StatusOK, nonNil(run.annotations[start:end]))
}

func (s *Server) handleListCheckRunsForRef(w http.ResponseWriter, r *http.Request, rp *repo) {
	c, err := rp.resolveCommit(r.PathValue("ref"))
	if err != nil {
		writeError(w, r, http.StatusUnprocessableEntity, "No commit found for SHA: "+r.PathValue("ref"))
		return
	}
	q := r.URL.Query()
	filter := q.Get("filter")
	if filter == "" {
		filter = "latest"
	}
	runs := rp.checkRunsFor(c.Hash.String(), filter == "latest")
	out := []*github.CheckRun{}
	for _, run := range runs {
		if name := q.Get("check_name"); name != "" && run.name != name {
			continue
		}
		if status := q.Get("status"); status != "" && run.status != status {
			continue
		}
		out = append(out, s.checkRunJSON(rp, run))
	}
	total := len(out)
	start, end := paginate(w, r, total)
	writeJSON(w, http.StatusOK, &github.ListCheckRunsResults{Total: ptr(total), CheckRuns: out[start:end]})
}

// checkRunsFor lists the runs on a commit, newest first; latest keeps only the newest
// run of each name (GitHub's default filter).
func (rp *repo) checkRunsFor(sha string, latest bool) []*checkRun {
	var out []*checkRun
	seen := map[string]bool{}
	for i := len(rp.checkRuns) - 1; i >= 0; i-- {
		run := rp.checkRuns[i]
		if run.headSHA != sha || (latest && seen[run.name]) {
			continue
		}
		seen[run.name] = true
		out = append(out, run)
	}
	return out
}

// checkRunFromPath finds the check run the path's {id} names, or answers 404 and
// returns nil.
func (rp *repo) checkRunFromPath(w http.ResponseWriter, r *http.Request) *checkRun {
	var run *checkRun
	if id, err := strconv.ParseInt(r.PathValue("id"), 10, 64); err == nil {
		run = rp.checkRunByID(id)
	}
	return found(w, r, run)
}

func (rp *repo) checkRunByID(id int64) *checkRun {
	for _, run := range rp.checkRuns {
		if run.id == id {
			return run
		}
	}
	return nil
}

// checkSuiteLocked returns the App's check suite for a commit, creating it.
func (s *Server) checkSuiteLocked(rp *repo, sha string) int64 {
	if id, ok := rp.checkSuites[sha]; ok {
		return id
	}
	id := s.newID()
	rp.checkSuites[sha] = id
	return id
}

func (s *Server) appJSON() *github.App {
	return &github.App{ID: ptr(appID), Slug: ptr(appSlug), Name: ptr(appName), NodeID: ptr(nodeID("App", appID))}
}

// pullsForSHA are the open pull requests whose head is sha, in the short form check
// payloads carry.
func (s *Server) pullsForSHA(rp *repo, sha string) []*github.PullRequest {
	out := []*github.PullRequest{}
	for _, pr := range rp.pulls {
		rp.liveSHAs(pr)
		if pr.state != "open" || pr.headSHA != sha {
			continue
		}
		out = append(out, &github.PullRequest{
			ID:     ptr(pr.id),
			Number: ptr(pr.number),
			URL:    ptr(s.apiURL("repos/%s/pulls/%d", rp.fullName(), pr.number)),
			Head:   &github.PullRequestBranch{Ref: ptr(pr.head), SHA: ptr(pr.headSHA), Repo: &github.Repository{ID: ptr(rp.id), Name: ptr(rp.name), URL: ptr(s.apiURL("repos/%s", rp.fullName()))}},
			Base:   &github.PullRequestBranch{Ref: ptr(pr.base), SHA: ptr(pr.baseSHA), Repo: &github.Repository{ID: ptr(rp.id), Name: ptr(rp.name), URL: ptr(s.apiURL("repos/%s", rp.fullName()))}},
		})
	}
	return out
}

func (s *Server) checkSuiteJSON(rp *repo, sha string) *github.CheckSuite {
	suite := &github.CheckSuite{
		ID:           ptr(s.checkSuiteLocked(rp, sha)),
		NodeID:       ptr(nodeID("CheckSuite", s.checkSuiteLocked(rp, sha))),
		HeadSHA:      ptr(sha),
		URL:          ptr(s.apiURL("repos/%s/check-suites/%d", rp.fullName(), s.checkSuiteLocked(rp, sha))),
		App:          s.appJSON(),
		Status:       ptr("queued"),
		PullRequests: s.pullsForSHA(rp, sha),
	}
	if refs, err := rp.branches(); err == nil {
		for _, ref := range refs {
			if ref.Hash().String() == sha {
				suite.HeadBranch = ptr(ref.Name().Short())
				break
			}
		}
	}
	return suite
}

func (s *Server) checkRunJSON(rp *repo, run *checkRun) *github.CheckRun {
	full := rp.fullName()
	out := &github.CheckRun{
		ID:         ptr(run.id),
		NodeID:     ptr(nodeID("CheckRun", run.id)),
		HeadSHA:    ptr(run.headSHA),
		ExternalID: ptr(run.externalID),
		URL:        ptr(s.apiURL("repos/%s/check-runs/%d", full, run.id)),
		HTMLURL:    ptr(s.htmlURL("%s/runs/%d", full, run.id)),
		DetailsURL: ptr(run.detailsURL),
		Status:     ptr(run.status),
		StartedAt:  ts(run.startedAt),
		Name:       ptr(run.name),
		Output: &github.CheckRunOutput{
			Title:            run.title,
			Summary:          run.summary,
			Text:             run.text,
			AnnotationsCount: ptr(len(run.annotations)),
			AnnotationsURL:   ptr(s.apiURL("repos/%s/check-runs/%d/annotations", full, run.id)),
		},
		CheckSuite:   &github.CheckSuite{ID: ptr(run.suiteID)},
		App:          s.appJSON(),
		PullRequests: s.pullsForSHA(rp, run.headSHA),
	}
	if run.conclusion != "" {
		out.Conclusion = ptr(run.conclusion)
	}
	if run.completedAt != nil {
		out.CompletedAt = ts(*run.completedAt)
	}
	return out
}

func (s *Server) fireCheckRunLocked(rp *repo, run *checkRun, action string, sender *account, extra func(*github.CheckRunEvent)) <-chan struct{} {
	ev := &github.CheckRunEvent{
		Action:   ptr(action),
		CheckRun: s.checkRunJSON(rp, run),
		Repo:     s.repoJSON(rp),
		Sender:   s.userJSON(sender),
	}
	ev.CheckRun.CheckSuite = s.checkSuiteJSON(rp, run.headSHA)
	if extra != nil {
		extra(ev)
	}
	return s.repoEventLocked(rp, "check_run", func(inst *github.Installation) any {
		ev.Installation = inst
		return ev
	})
}

func (s *Server) fireCheckSuiteLocked(rp *repo, action, sha, branch string, sender *account) <-chan struct{} {
	suite := s.checkSuiteJSON(rp, sha)
	if branch != "" {
		suite.HeadBranch = ptr(branch)
	}
	if c, err := rp.resolveCommit(sha); err == nil {
		suite.HeadCommit = &github.Commit{
			SHA:     ptr(sha),
			Message: ptr(c.Message),
			Author:  &github.CommitAuthor{Name: ptr(c.Author.Name), Email: ptr(c.Author.Email), Date: ts(c.Author.When)},
		}
	}
	ev := &github.CheckSuiteEvent{
		Action:     ptr(action),
		CheckSuite: suite,
		Repo:       s.repoJSON(rp),
		Sender:     s.userJSON(sender),
	}
	return s.repoEventLocked(rp, "check_suite", func(inst *github.Installation) any {
		ev.Installation = inst
		return ev
	})
}

// CheckRuns returns the check runs on a commit (every run, newest first).
func (s *Server) CheckRuns(t TB, repoName, sha string) []*github.CheckRun {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepoLocked(t, repoName)
	out := []*github.CheckRun{}
	for _, run := range rp.checkRunsFor(sha, false) {
		out = append(out, s.checkRunJSON(rp, run))
	}
	return out
}

// CheckRunActions returns the buttons (actions) a check run offers.
func (s *Server) CheckRunActions(t TB, repoName string, checkRunID int64) []*github.CheckRunAction {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mustCheckRunLocked(t, repoName, checkRunID).actions)
}

// CheckRunAnnotations returns the annotations of a check run, in the order they
// were added.
func (s *Server) CheckRunAnnotations(t TB, repoName string, checkRunID int64) []*github.CheckRunAnnotation {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mustCheckRunLocked(t, repoName, checkRunID).annotations)
}

func (s *Server) mustCheckRunLocked(t TB, repoName string, checkRunID int64) *checkRun {
	t.Helper()
	run := s.mustRepoLocked(t, repoName).checkRunByID(checkRunID)
	if run == nil {
		t.Fatalf("no check run %d in %s", checkRunID, repoName)
	}
	return run
}

// RerequestCheckRun fires check_run "rerequested", as a person pressing "Re-run".
func (s *Server) RerequestCheckRun(t TB, repoName string, checkRunID int64) Delivery {
	t.Helper()
	return s.checkRunAction(t, repoName, checkRunID, "rerequested", "")
}

// RequestCheckRunAction fires check_run "requested_action" for one of the run's
// actions (the identifier must be one the App offered), as a person pressing it.
func (s *Server) RequestCheckRunAction(t TB, repoName string, checkRunID int64, identifier string) Delivery {
	t.Helper()
	return s.checkRunAction(t, repoName, checkRunID, "requested_action", identifier)
}

func (s *Server) checkRunAction(t TB, repoName string, id int64, action, identifier string) Delivery {
	t.Helper()
	s.mu.Lock()
	rp := s.mustRepoLocked(t, repoName)
	run := rp.checkRunByID(id)
	if run == nil {
		s.mu.Unlock()
		t.Fatalf("no check run %d in %s", id, repoName)
	}
	if action == "requested_action" && !slices.ContainsFunc(run.actions, func(a *github.CheckRunAction) bool { return a.Identifier == identifier }) {
		s.mu.Unlock()
		t.Fatalf("check run %d offers no action %q", id, identifier)
	}
	done := s.fireCheckRunLocked(rp, run, action, s.personLocked(DefaultAuthor), func(ev *github.CheckRunEvent) {
		if identifier != "" {
			ev.RequestedAction = &github.RequestedAction{Identifier: identifier}
		}
	})
	s.mu.Unlock()
	<-done
	return s.lastDelivery(t, "check_run")
}

// RerequestCheckSuite fires check_suite "rerequested" for the commit, as a person
// pressing "Re-run all checks".
func (s *Server) RerequestCheckSuite(t TB, repoName, sha string) Delivery {
	t.Helper()
	s.mu.Lock()
	rp := s.mustRepoLocked(t, repoName)
	if _, ok := rp.existingObject(sha); !ok {
		s.mu.Unlock()
		t.Fatalf("no commit %s in %s", sha, repoName)
	}
	done := s.fireCheckSuiteLocked(rp, "rerequested", sha, "", s.personLocked(DefaultAuthor))
	s.mu.Unlock()
	<-done
	return s.lastDelivery(t, "check_suite")
}

func (s *Server) lastDelivery(t TB, event string) Delivery {
	t.Helper()
	ds := s.DeliveriesOf(event, "")
	if len(ds) == 0 {
		t.Fatalf("no %s delivery was made (is the repository installed and the App subscribed?)", event)
	}
	return ds[len(ds)-1]
}
