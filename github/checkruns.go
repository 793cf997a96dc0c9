package github

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/markdown"
	"github.com/kukie/kukie-gitops/textcut"
)

// Check run names and limits. The limits are GitHub's: a larger output field or more
// annotations in one request is refused with 422, so output is cut to fit and
// annotations are sent in batches. GitHub counts characters; the limits are kept
// in bytes, which are never fewer. An annotation's title is at most 255
// characters, and the run's title, shown on one line as plain text as well, is
// held to the same; an annotation's message is at most "64 KB", read as the
// smaller 64000 so either reading holds.
const (
	CheckRunName             = "kukie/render"
	PolicyCheckRunName       = "kukie/policy"
	RerenderAction           = "rerender"
	MaxOutputChars           = 65535
	MaxTitleChars            = 255
	MaxAnnotationMessage     = 64000
	MaxAnnotationsPerRequest = 50
)

// Check run conclusions the pipeline reports.
const (
	ConclusionSuccess        = "success"
	ConclusionFailure        = "failure"
	ConclusionActionRequired = "action_required"
	ConclusionNeutral        = "neutral"
	ConclusionCancelled      = "cancelled"
)

// Annotation marks lines of a file in the PR's diff view.
type Annotation struct {
	Path      string
	StartLine int
	EndLine   int
	Level     string // notice, warning, failure
	Title     string
	Message   string
}

// CheckReport is the content of a check run. An empty Conclusion means in progress.
type CheckReport struct {
	// Name is the check run's name: CheckRunName when empty. Only kukie/render
	// carries the Re-render button.
	Name        string
	ExternalID  string // the plan code; used to adopt a run created before a restart
	Conclusion  string
	Title       string
	Summary     string
	Text        string
	Annotations []Annotation
	DetailsURL  string // the full diff in the service's API
}

// CheckRunRef identifies a published check run.
type CheckRunRef struct {
	ID  int64
	URL string
}

// PublishCheckRun creates or updates the check run r names (kukie/render unless
// it names another) on headSHA. With id 0
// it first adopts a run of the same plan already on that commit, so a resumed step
// never leaves two runs and a head keeps one run however often it is re-rendered.
// GitHub appends the annotations of every update to a run's list, so an update
// sends only the annotations the run does not carry yet: a re-render of an unchanged
// head marks the same lines, which stay marked once. Output is kept within GitHub's limits (DetailsURL is named
// where it was cut) and annotations beyond the first 50 follow in further updates.
func PublishCheckRun(ctx context.Context, c *gh.Client, owner, repo, headSHA string, id int64, r CheckReport) (CheckRunRef, error) {
	name := r.Name
	if name == "" {
		name = CheckRunName
	}
	if id == 0 {
		existing, err := findCheckRun(ctx, c, owner, repo, headSHA, name, r.ExternalID)
		if err != nil {
			return CheckRunRef{}, err
		}
		id = existing
	}
	annotations := r.Annotations
	if id != 0 {
		var err error
		if annotations, err = newAnnotations(ctx, c, owner, repo, id, annotations); err != nil {
			return CheckRunRef{}, err
		}
	}
	var batches [][]Annotation
	for rest := annotations; len(rest) > 0; {
		n := min(len(rest), MaxAnnotationsPerRequest)
		batches = append(batches, rest[:n])
		rest = rest[n:]
	}
	first := func() []Annotation {
		if len(batches) == 0 {
			return nil
		}
		return batches[0]
	}
	output := func(batch []Annotation) *gh.CheckRunOutput {
		return &gh.CheckRunOutput{
			Title:       gh.String(fitText(r.Title, MaxTitleChars)),
			Summary:     gh.String(FitOutput(r.Summary, MaxOutputChars, r.DetailsURL)),
			Text:        gh.String(FitOutput(r.Text, MaxOutputChars, r.DetailsURL)),
			Annotations: annotationsOf(batch),
		}
	}
	var status, conclusion *string
	var completedAt *gh.Timestamp
	if r.Conclusion == "" {
		status = gh.String("in_progress")
	} else {
		status, conclusion = gh.String("completed"), gh.String(r.Conclusion)
		completedAt = &gh.Timestamp{Time: time.Now()}
	}
	var actions []*gh.CheckRunAction
	if name == CheckRunName {
		actions = []*gh.CheckRunAction{{Label: "Re-render", Description: "Render and verify the change again", Identifier: RerenderAction}}
	}
	var details *string
	if r.DetailsURL != "" {
		details = gh.String(r.DetailsURL)
	}

	var run *gh.CheckRun
	var err error
	if id == 0 {
		run, _, err = c.Checks.CreateCheckRun(ctx, owner, repo, gh.CreateCheckRunOptions{
			Name: name, HeadSHA: headSHA, DetailsURL: details, ExternalID: gh.String(r.ExternalID),
			Status: status, Conclusion: conclusion, CompletedAt: completedAt, Output: output(first()), Actions: actions,
		})
		if err != nil {
			return CheckRunRef{}, fmt.Errorf("create check run on %s: %w", headSHA, err)
		}
	} else {
		run, _, err = c.Checks.UpdateCheckRun(ctx, owner, repo, id, gh.UpdateCheckRunOptions{
			Name: name, DetailsURL: details, ExternalID: gh.String(r.ExternalID),
			Status: status, Conclusion: conclusion, CompletedAt: completedAt, Output: output(first()), Actions: actions,
		})
		if err != nil {
			return CheckRunRef{}, fmt.Errorf("update check run %d: %w", id, err)
		}
	}
	ref := CheckRunRef{ID: run.GetID(), URL: run.GetHTMLURL()}
	for i := 1; i < len(batches); i++ {
		// GitHub appends the annotations of each update to the run's list.
		if _, _, err := c.Checks.UpdateCheckRun(ctx, owner, repo, ref.ID, gh.UpdateCheckRunOptions{
			Name: name, Output: output(batches[i]),
		}); err != nil {
			return ref, fmt.Errorf("add annotations batch %d to check run %d: %w", i+1, ref.ID, err)
		}
	}
	return ref, nil
}

func findCheckRun(ctx context.Context, c *gh.Client, owner, repo, headSHA, name, externalID string) (int64, error) {
	if externalID == "" {
		return 0, nil
	}
	res, _, err := c.Checks.ListCheckRunsForRef(ctx, owner, repo, headSHA, &gh.ListCheckRunsOptions{
		CheckName: gh.String(name), ListOptions: gh.ListOptions{PerPage: 100},
	})
	if err != nil {
		return 0, fmt.Errorf("list check runs on %s: %w", headSHA, err)
	}
	for _, run := range res.CheckRuns {
		if run.GetExternalID() == externalID && run.GetHeadSHA() == headSHA {
			return run.GetID(), nil
		}
	}
	return 0, nil
}

// newAnnotations returns the annotations of want that check run id does not carry
// yet (compared as GitHub stores them).
func newAnnotations(ctx context.Context, c *gh.Client, owner, repo string, id int64, want []Annotation) ([]Annotation, error) {
	if len(want) == 0 {
		return nil, nil
	}
	type key struct {
		path, level, title, message string
		start, end                  int
	}
	keyOf := func(a *gh.CheckRunAnnotation) key {
		return key{a.GetPath(), a.GetAnnotationLevel(), a.GetTitle(), a.GetMessage(), a.GetStartLine(), a.GetEndLine()}
	}
	have := map[key]bool{}
	opts := &gh.ListOptions{PerPage: 100}
	for {
		page, resp, err := c.Checks.ListCheckRunAnnotations(ctx, owner, repo, id, opts)
		if err != nil {
			return nil, fmt.Errorf("list annotations of check run %d: %w", id, err)
		}
		for _, a := range page {
			have[keyOf(a)] = true
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	var out []Annotation
	for i, a := range annotationsOf(want) {
		if !have[keyOf(a)] {
			out = append(out, want[i])
		}
	}
	return out, nil
}

func annotationsOf(in []Annotation) []*gh.CheckRunAnnotation {
	out := make([]*gh.CheckRunAnnotation, 0, len(in))
	for _, a := range in {
		end := a.EndLine
		if end < a.StartLine {
			end = a.StartLine
		}
		level := a.Level
		if level == "" {
			level = "notice"
		}
		out = append(out, &gh.CheckRunAnnotation{
			Path: gh.String(a.Path), StartLine: gh.Int(max(a.StartLine, 1)), EndLine: gh.Int(max(end, 1)),
			AnnotationLevel: gh.String(level), Title: gh.String(fitText(a.Title, MaxTitleChars)),
			Message: gh.String(fitText(a.Message, MaxAnnotationMessage)),
		})
	}
	return out
}

// fitText cuts plain text (a title, an annotation's message, which GitHub shows
// as written) to at most limit bytes, at a whole character, marked "…".
func fitText(s string, limit int) string {
	return textcut.Cut(s, limit-len(textcut.Ellipsis))
}

// cutInFence cuts s to at most n bytes inside a line of a fenced block, where
// nothing is Markdown, at a whole character, and closes the block: a diff of one
// long line (a dashboard's JSON in a ConfigMap) keeps what fits instead of
// nothing. ok is false when the cut falls outside a fenced block, on the line
// that opens one, or where the cut line would close it.
func cutInFence(s string, n int) (string, bool) {
	if n <= 0 || n >= len(s) {
		return "", false
	}
	start := strings.LastIndexByte(s[:n], '\n') + 1
	fence := markdown.OpenFence(s[:start])
	if fence == "" {
		return "", false
	}
	n -= len("\n") + len(fence)
	for n > start && !utf8.RuneStart(s[n]) {
		n--
	}
	if n <= start || markdown.OpenFence(s[:n]) != fence {
		return "", false
	}
	return s[:n] + "\n" + fence, true
}

// FitOutput cuts Markdown s to at most limit bytes (GitHub counts characters; bytes
// are never fewer) at the end of a line, or inside a line of a fenced block
// (cutInFence), ending with a note that names where the rest is. A cut inside a
// line of prose could end inside a code span, whose backticks then open none: the
// rest of the line, words from elsewhere that the span held, would be read as
// Markdown. A block the cut leaves open is closed.
func FitOutput(s string, limit int, detailsURL string) string {
	if len(s) <= limit {
		return s
	}
	note := "\n\n… output cut to fit GitHub's limit."
	if detailsURL != "" {
		note = "\n\n… output cut to fit GitHub's limit; the full diff is at " + detailsURL
	}
	cut := limit - len(note)
	if cut < 0 {
		cut, note = limit, ""
	}
	if kept, ok := cutInFence(s, cut); ok {
		return kept + note
	}
	for {
		cut = strings.LastIndexByte(s[:cut], '\n') + 1
		kept := s[:cut]
		// Close a fenced block the cut left open, so the note is not shown as code.
		closing := ""
		if fence := markdown.OpenFence(kept); fence != "" {
			closing = fence
		}
		if len(kept)+len(closing)+len(note) <= limit || cut == 0 {
			return kept + closing + note
		}
		cut = min(cut-1, max(0, limit-len(note)-len(closing)))
	}
}
