package web

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/kukie/kukie-gitops/policy"
	"github.com/kukie/kukie-gitops/prcheck"
	"github.com/kukie/kukie-gitops/store"
)

// Check keys of the heads prcheck checks (the handler names them so).
const (
	pullKeyPrefix       = "pull/"
	mergeGroupKeyPrefix = "merge_group/"
)

// checkView is what a check's page shows: the head it checked, how it ended, and
// for a completed check what it found, with every app's cluster diff whole.
type checkView struct {
	store.PullCheck
	Login string
	// Pull is the pull request's number and PullURL its page on GitHub; MergeGroup
	// the queue's ref for a merge group's check.
	Pull       string
	PullURL    string
	MergeGroup string
	// CompareURL is GitHub's view of the change from the base to the head.
	CompareURL string
	Result     *prcheck.Result
	// Policy is the check's kukie/policy outcome, when the check kept one.
	Policy   *checkPolicy
	Apps     []checkApp
	Warnings []string
	Files    []checkFile
	History  []store.PullCheck
	// Stale says the base branch moved under the check, when it did.
	Stale *checkStale
}

// checkStale is what a page says of a check whose base branch moved after it (or
// while it ran): the base it ran against, the commit the branch moved to for each
// run it made stale, and what to do.
type checkStale struct {
	Branch string
	// Ran is the base commit the check ran against.
	Ran    checkCommit
	Render *checkCommit
	Policy *checkCommit
	// Running is the commit the branch moved to while the check still runs.
	Running *checkCommit
	// Owed is set when the check could not judge, as it completed, whether the
	// branch moved under it: the next push to it does.
	Owed bool
	// PolicyBranch is the branch the policy was read from (the default branch,
	// whatever the check's base).
	PolicyBranch string
}

// checkCommit is a commit with its page on GitHub ("" without the repository's URL).
type checkCommit struct {
	SHA   string
	Short string
	URL   string
}

// checkApp is one reached Application with its objects as a page shows them.
type checkApp struct {
	prcheck.ResultApp
	Objects []objectDiff
}

// commitView is the commit sha of c's repository as a page shows it; nil for "".
func commitView(c store.PullCheck, sha string) *checkCommit {
	if sha == "" {
		return nil
	}
	out := &checkCommit{SHA: sha, Short: sha}
	if len(sha) > 7 {
		out.Short = sha[:7]
	}
	if c.RepoURL != "" {
		out.URL = c.RepoURL + "/commit/" + url.PathEscape(sha)
	}
	return out
}

// checkPolicy is the kukie/policy outcome as a page shows it: each finding with a
// link to its manifest line at the head, the invalid .kukie.yml's line on the
// default branch, and the commit of the default branch the policy was read at or
// after (ReadFrom), when the check knows it.
type checkPolicy struct {
	prcheck.ResultPolicy
	ReadFrom  *checkCommit
	ConfigURL string
	Rows      []checkFinding
}

// checkFinding is one finding; Where is its file:line, URL that line on GitHub.
type checkFinding struct {
	prcheck.ResultFinding
	Where string
	URL   string
}

// checkFile is one changed file with the head's lines it changes.
type checkFile struct {
	prcheck.ResultFile
	URL   string
	Lines string
}

func checkPage(c store.PullCheck, history []store.PullCheck, login string) (checkView, error) {
	v := checkView{PullCheck: c, Login: login, History: history}
	switch {
	case strings.HasPrefix(c.Key, pullKeyPrefix):
		v.Pull = strings.TrimPrefix(c.Key, pullKeyPrefix)
		if c.RepoURL != "" {
			v.PullURL = c.RepoURL + "/pull/" + url.PathEscape(v.Pull)
		}
	case strings.HasPrefix(c.Key, mergeGroupKeyPrefix):
		v.MergeGroup = strings.TrimPrefix(c.Key, mergeGroupKeyPrefix)
	}
	if c.RepoURL != "" && c.BaseSHA != "" {
		v.CompareURL = c.RepoURL + "/compare/" + url.PathEscape(c.BaseSHA) + "..." + url.PathEscape(c.HeadSHA)
	}
	v.Stale = staleView(c)
	if len(c.Result) == 0 {
		return v, nil
	}
	var res prcheck.Result
	if err := json.Unmarshal(c.Result, &res); err != nil {
		return v, fmt.Errorf("decode the result of check %s: %w", c.ID, err)
	}
	v.Result = &res
	if v.Stale != nil && res.Policy != nil && res.Policy.DefaultBranch != "" {
		v.Stale.PolicyBranch = res.Policy.DefaultBranch
	}
	if res.Policy != nil {
		v.Policy = policyView(c, *res.Policy)
	}
	for _, f := range res.Files {
		cf := checkFile{ResultFile: f}
		if c.RepoURL != "" && f.Status != "removed" {
			cf.URL = c.RepoURL + "/blob/" + url.PathEscape(c.HeadSHA) + "/" + escapePath(f.Path)
		}
		var ranges []string
		for _, l := range f.Lines {
			if l[0] == l[1] {
				ranges = append(ranges, fmt.Sprint(l[0]))
			} else {
				ranges = append(ranges, fmt.Sprintf("%d–%d", l[0], l[1]))
			}
		}
		cf.Lines = strings.Join(ranges, ", ")
		v.Files = append(v.Files, cf)
	}
	for _, a := range res.Apps {
		ca := checkApp{ResultApp: a}
		for _, d := range a.Diffs {
			ca.Objects = append(ca.Objects, masked(d))
		}
		v.Apps = append(v.Apps, ca)
		switch {
		case a.NotChecked != "":
			v.Warnings = append(v.Warnings, a.Name+" was not checked: "+a.NotChecked)
		case a.BrokenBefore != "":
			v.Warnings = append(v.Warnings, a.Name+" did not render before this change ("+a.BrokenBefore+"); every object it renders now is shown as added")
		case a.DiffsLeftOut:
			v.Warnings = append(v.Warnings, a.Name+": its diff was too large to keep with the check; the counts are complete")
		}
		// As the check run says it: an app rendered with Helm's default
		// capabilities was checked against a cluster it may not deploy to.
		if a.Warning != "" && a.NotChecked == "" {
			v.Warnings = append(v.Warnings, a.Name+": "+a.Warning)
		}
	}
	v.Warnings = append(v.Warnings, res.NotChecked...)
	if res.Incomplete {
		v.Warnings = append(v.Warnings, "GitHub listed only part of the changed files, so every Application deploying from the branch was rendered")
	}
	return v, nil
}

// staleView is what the page says of the base moves the check was told of; nil
// when none concerns it.
func staleView(c store.PullCheck) *checkStale {
	commit := func(sha string) *checkCommit { return commitView(c, sha) }
	st := &checkStale{Branch: c.BaseBranch, Render: commit(c.BaseMovedSHA), Policy: commit(c.PolicyMovedSHA), PolicyBranch: c.BaseBranch,
		Owed: c.State == store.PullCheckCompleted && c.MovesPending}
	if c.State == store.PullCheckRunning {
		st.Running = commit(c.MovedWhileRunningSHA)
	}
	if st.Render == nil && st.Policy == nil && st.Running == nil && !st.Owed {
		return nil
	}
	if ran := commit(c.BaseSHA); ran != nil {
		st.Ran = *ran
	}
	return st
}

func policyView(c store.PullCheck, p prcheck.ResultPolicy) *checkPolicy {
	out := &checkPolicy{ResultPolicy: p, ReadFrom: commitView(c, c.PolicySHA)}
	if c.RepoURL != "" && p.ConfigError != "" && p.DefaultBranch != "" {
		out.ConfigURL = c.RepoURL + "/blob/" + escapePath(p.DefaultBranch) + "/" + policy.ConfigFile
		if p.ConfigLine > 0 {
			out.ConfigURL += fmt.Sprintf("#L%d", p.ConfigLine)
		}
	}
	for _, f := range p.Findings {
		row := checkFinding{ResultFinding: f}
		if f.Path != "" {
			row.Where = f.Path
			if f.Line > 0 {
				row.Where += fmt.Sprintf(":%d", f.Line)
			}
			if c.RepoURL != "" {
				row.URL = c.RepoURL + "/blob/" + url.PathEscape(c.HeadSHA) + "/" + escapePath(f.Path)
				if f.Line > 0 {
					row.URL += fmt.Sprintf("#L%d", f.Line)
				}
			}
		}
		out.Rows = append(out.Rows, row)
	}
	return out
}

// escapePath escapes each segment of a repository path for a URL.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
