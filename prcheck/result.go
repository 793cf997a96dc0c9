package prcheck

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/kukie/kukie-gitops/render"
)

// CheckPagePath is the path of a check's web page (package web serves it) before
// the check's id: the check run's details link.
const CheckPagePath = "/checks/"

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
			Added: add, Changed: chg, Removed: rem, Diffs: a.diffs, Failed: a.failed, NotChecked: a.notChecked, BrokenBefore: a.brokenBefore})
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
