package prcheck

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/kukie/kukie-gitops/policy"
	"github.com/kukie/kukie-gitops/render"
)

// CheckPagePath is the path of a check's web page (package web serves it) before
// the check's id: the check run's details link.
const CheckPagePath = "/checks/"

// PolicyAnchor is the fragment of a check's page where its kukie/policy findings
// are: the kukie/policy run's details link is the page at it.
const PolicyAnchor = "#policy"

// CheckURL is the page of the check id on the service at publicURL; "" without a
// public URL, since GitHub needs an absolute link.
func CheckURL(publicURL, id string) string {
	if publicURL == "" || id == "" {
		return ""
	}
	return strings.TrimSuffix(publicURL, "/") + CheckPagePath + url.PathEscape(id)
}

// maxStoredResult bounds a check's stored result: past it, the diffs of the last
// Applications are left out (and say so), so a change reaching every app of a
// monorepo does not make a row of hundreds of megabytes.
const maxStoredResult = 8 << 20

// Result is what a check computed, as the store keeps it for the check's page:
// every reached Application's whole cluster diff, masked as render masks it (no
// Secret value), not cut to what a check run can hold.
type Result struct {
	Title      string `json:"title"`
	Conclusion string `json:"conclusion"`
	// Deploying is the number of Applications deploying from the repository and
	// branch; Apps are those the change reaches.
	Deploying  int          `json:"deploying"`
	Files      []ResultFile `json:"files,omitempty"`
	Incomplete bool         `json:"incomplete,omitempty"`
	Apps       []ResultApp  `json:"apps,omitempty"`
	NotChecked []string     `json:"not_checked,omitempty"`
	// Policy is the check's kukie/policy run; nil for a check recorded before it
	// was kept.
	Policy *ResultPolicy `json:"policy,omitempty"`
}

// ResultPolicy is what the check's kukie/policy run concluded, every finding with
// its manifest line (the run's annotations are cut at GitHub's limits; these are
// cut at maxStoredFindings).
type ResultPolicy struct {
	Title      string `json:"title"`
	Conclusion string `json:"conclusion"`
	// DefaultBranch is the branch the .kukie.yml was read from; Configured says a
	// rule is on.
	DefaultBranch string `json:"default_branch,omitempty"`
	Configured    bool   `json:"configured,omitempty"`
	// ConfigError is why the .kukie.yml cannot be used, at ConfigLine (0: the file).
	ConfigError string          `json:"config_error,omitempty"`
	ConfigLine  int             `json:"config_line,omitempty"`
	Findings    []ResultFinding `json:"findings,omitempty"`
	// FindingsLeftOut counts the findings past maxStoredFindings.
	FindingsLeftOut int `json:"findings_left_out,omitempty"`
	// DryRun is what became of the dry-run rule (policy.Report.DryRunOutcome).
	DryRun     string   `json:"dry_run,omitempty"`
	NotChecked []string `json:"not_checked,omitempty"`
	// Summary is the run's summary as published, for publishing it again marked
	// stale (BaseMoved); "" for a check recorded before it was kept.
	Summary string `json:"summary,omitempty"`
}

// ResultFinding is one policy finding: Path and Line are its manifest line, when
// known. Message never quotes a Secret's value.
type ResultFinding struct {
	Rule    string `json:"rule"`
	Level   string `json:"level"`
	App     string `json:"app,omitempty"`
	Object  string `json:"object,omitempty"`
	Path    string `json:"path,omitempty"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// maxStoredFindings bounds the findings a check keeps: a policy that every object
// of a monorepo breaks is told by its first thousand.
const maxStoredFindings = 1000

// policyResult is what the store keeps of the kukie/policy run pol.
func policyResult(pol *policy.Report) *ResultPolicy {
	out := &ResultPolicy{Title: pol.Title(), Conclusion: pol.Conclusion(), DefaultBranch: pol.DefaultBranch,
		Configured: pol.Config != nil && pol.Config.Enabled(), DryRun: pol.DryRunOutcome(), Summary: pol.Summary()}
	for _, n := range pol.NotChecked {
		out.NotChecked = append(out.NotChecked, n.String())
	}
	if pol.ConfigErr != nil {
		out.ConfigError, out.ConfigLine = pol.ConfigErr.Msg, pol.ConfigErr.Line
	}
	for i, f := range pol.Findings {
		if i == maxStoredFindings {
			out.FindingsLeftOut = len(pol.Findings) - i
			break
		}
		out.Findings = append(out.Findings, ResultFinding{Rule: f.Rule, Level: string(f.Level), App: f.App, Object: f.Object,
			Path: f.Path, Line: f.Line, Message: f.Message})
	}
	return out
}

// ResultFile is one file the change touches.
type ResultFile struct {
	Path         string   `json:"path"`
	PreviousPath string   `json:"previous_path,omitempty"`
	Status       string   `json:"status"`
	Lines        [][2]int `json:"lines,omitempty"`
}

// ResultApp is one reached Application.
type ResultApp struct {
	Name       string   `json:"name"`
	Cluster    string   `json:"cluster"`
	SyncPolicy string   `json:"sync_policy"`
	Files      []string `json:"files,omitempty"`
	Added      int      `json:"added"`
	Changed    int      `json:"changed"`
	Removed    int      `json:"removed"`
	// Diffs are the objects that change; DiffsLeftOut says they were too many to
	// keep (the counts stay).
	Diffs        []render.ObjectDiff `json:"diffs,omitempty"`
	DiffsLeftOut bool                `json:"diffs_left_out,omitempty"`
	Failed       string              `json:"failed,omitempty"`
	NotChecked   string              `json:"not_checked,omitempty"`
	BrokenBefore string              `json:"broken_before,omitempty"`
	// Warning says what the render could not take from the cluster: a Helm app
	// rendered with Helm's default capabilities, and why.
	Warning string `json:"warning,omitempty"`
}

// result is what the store keeps of r.
func (r *report) result() Result {
	out := Result{Title: r.title(), Conclusion: r.conclusion(), Deploying: r.deploying, Incomplete: r.incomplete, NotChecked: r.notChecked}
	for _, f := range r.files {
		out.Files = append(out.Files, ResultFile{Path: f.Path, PreviousPath: f.PreviousPath, Status: f.Status, Lines: f.Lines})
	}
	for _, a := range r.apps {
		add, chg, rem := a.counts()
		out.Apps = append(out.Apps, ResultApp{Name: a.name, Cluster: a.cluster, SyncPolicy: string(a.level), Files: a.files,
			Added: add, Changed: chg, Removed: rem, Diffs: a.diffs, Failed: a.failed, NotChecked: a.notChecked, BrokenBefore: a.brokenBefore, Warning: a.capabilities})
	}
	return out
}

// encode is the result as JSON within maxStoredResult, leaving out the diffs of
// the last Applications when it is over.
func (res Result) encode() (json.RawMessage, error) {
	res.Apps = slices.Clone(res.Apps)
	for i := len(res.Apps); ; i-- {
		b, err := json.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("encode the check's result: %w", err)
		}
		if len(b) <= maxStoredResult || i == 0 {
			return b, nil
		}
		if len(res.Apps[i-1].Diffs) > 0 {
			res.Apps[i-1].Diffs, res.Apps[i-1].DiffsLeftOut = nil, true
		}
	}
}
