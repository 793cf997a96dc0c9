package prcheck

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/markdown"
	"github.com/kukie/kukie-gitops/policy"
	"github.com/kukie/kukie-gitops/render"
)

// Bounds of what a check run shows: GitHub refuses more than MaxOutputChars per
// field; textBudget leaves room for the note that says what was left out, and
// maxAnnotations keeps a change of hundreds of files to a few requests.
const (
	textBudget     = github.MaxOutputChars - 512
	maxAnnotations = 200
	maxListedApps  = 5
)

// report is the outcome of one check.
type report struct {
	repo, branch string
	files        []github.ChangedFile
	incomplete   bool
	// deploying is the number of Applications deploying from the repository and
	// branch; apps are those the change reaches.
	deploying  int
	apps       []appResult
	notChecked []string
}

// appResult is one reached Application.
type appResult struct {
	name, cluster string
	level         argocd.Level
	files         []string
	diffs         []render.ObjectDiff
	// failed says why the head does not render; notChecked why the app was not
	// rendered; brokenBefore why the base did not render (the head does).
	failed, notChecked, brokenBefore string
	// findings are the policy's on the head's render, the dry-run's refusals
	// among them; dryRun is what the dry-run sent and found.
	findings []policy.Finding
	dryRun   appDryRun
	// capabilities says why a Helm app rendered with Helm's default
	// capabilities instead of its cluster's ("" when it did not).
	capabilities string
}

func (a appResult) counts() (added, changed, removed int) {
	for _, d := range a.diffs {
		switch d.Action {
		case "added":
			added++
		case "removed":
			removed++
		default:
			changed++
		}
	}
	return
}

// conclusion is failure when a reached app no longer renders, neutral when the
// change reaches no app, success otherwise.
func (r *report) conclusion() string {
	checked := 0
	for _, a := range r.apps {
		if a.failed != "" {
			return github.ConclusionFailure
		}
		if a.notChecked == "" {
			checked++
		}
	}
	if checked == 0 {
		return github.ConclusionNeutral
	}
	return github.ConclusionSuccess
}

func (r *report) title() string {
	failed, changing := 0, 0
	for _, a := range r.apps {
		if a.failed != "" {
			failed++
		} else if len(a.diffs) > 0 {
			changing++
		}
	}
	switch {
	case r.deploying == 0:
		return "No Application deploys from " + r.branch
	case len(r.apps) == 0:
		return "No Application reads the changed files"
	case failed > 0:
		return fmt.Sprintf("%d of %d affected Applications no longer render", failed, len(r.apps))
	}
	return fmt.Sprintf("%d Applications affected, %d change in the cluster", len(r.apps), changing)
}

func (r *report) summary() string {
	var b strings.Builder
	// A branch's name may hold "@team": such a name is written as code.
	branch := markdown.Name(r.branch)
	switch {
	case r.deploying == 0:
		fmt.Fprintf(&b, "No Application in the team's clusters deploys from %s at %s, so nothing in a cluster changes with this pull request.\n", r.repo, branch)
	case len(r.apps) == 0:
		fmt.Fprintf(&b, "%d Applications deploy from %s at %s; none of them reads a file this change touches (%d files).\n", r.deploying, r.repo, branch, len(r.files))
	default:
		fmt.Fprintf(&b, "This change reaches %d of the %d Applications that deploy from %s at %s.\n\n", len(r.apps), r.deploying, r.repo, branch)
		b.WriteString("| Application | Cluster | Sync policy | Added | Changed | Removed |\n|---|---|---|---|---|---|\n")
		for _, a := range r.apps {
			if a.failed != "" || a.notChecked != "" {
				continue
			}
			add, chg, rem := a.counts()
			fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d |\n", markdown.Cell(a.name), markdown.Cell(a.cluster), a.level, add, chg, rem)
		}
	}
	// The reasons are render's, Kustomize's and Helm's words about the pull
	// request's files, quoting their paths and values: they are shown as code, so
	// a path or value is never read as a mention, link or image.
	var failed, skipped []string
	for _, a := range r.apps {
		switch {
		case a.failed != "":
			failed = append(failed, fmt.Sprintf("- **%s**: %s", a.name, markdown.CodeLine(a.failed)))
		case a.notChecked != "":
			skipped = append(skipped, fmt.Sprintf("- %s: %s", a.name, markdown.CodeLine(a.notChecked)))
		case a.brokenBefore != "":
			skipped = append(skipped, fmt.Sprintf("- %s did not render before this change (%s); every object it renders now is shown as added", a.name, markdown.CodeLine(a.brokenBefore)))
		}
		if a.capabilities != "" && a.notChecked == "" {
			skipped = append(skipped, fmt.Sprintf("- %s: %s", a.name, markdown.CodeLine(a.capabilities)))
		}
	}
	for _, n := range r.notChecked {
		skipped = append(skipped, "- "+n)
	}
	if r.incomplete {
		skipped = append(skipped, fmt.Sprintf("- GitHub lists at most %d changed files, so every Application deploying from the branch was rendered", github.MaxComparedFiles))
	}
	if len(failed) > 0 {
		b.WriteString("\n### No longer render\n" + strings.Join(failed, "\n") + "\n")
	}
	if len(skipped) > 0 {
		b.WriteString("\n### Not checked, or worth knowing\n" + strings.Join(skipped, "\n") + "\n")
	}
	return b.String()
}

// text is each app's cluster diff, fenced, cut at whole apps within GitHub's limit.
func (r *report) text() string {
	var b strings.Builder
	left := 0
	for i, a := range r.apps {
		if len(a.diffs) == 0 {
			continue
		}
		var s strings.Builder
		add, chg, rem := a.counts()
		fmt.Fprintf(&s, "### %s\n%d added, %d modified, %d removed\n\n", a.name, add, chg, rem)
		var diff strings.Builder
		for _, d := range a.diffs {
			diff.WriteString(d.Diff)
		}
		s.WriteString(markdown.CodeBlock("diff", diff.String()) + "\n")
		if b.Len()+s.Len() > textBudget {
			for _, rest := range r.apps[i:] {
				if len(rest.diffs) > 0 {
					left++
				}
			}
			break
		}
		b.WriteString(s.String())
	}
	if left > 0 {
		fmt.Fprintf(&b, "… the diffs of %d more Applications are not shown: GitHub shows at most %d characters here.\n", left, github.MaxOutputChars)
	}
	return b.String()
}

// annotations mark the changed lines of the files each reached app reads: a
// failure where an app no longer renders, a notice where its objects change.
func (r *report) annotations() []github.Annotation {
	byFile := map[string]github.ChangedFile{}
	for _, f := range r.files {
		byFile[f.Path] = f
	}
	type mark struct {
		failed   []string
		changing []string
	}
	marks := map[string]*mark{}
	for _, a := range r.apps {
		if a.failed == "" && len(a.diffs) == 0 {
			continue
		}
		for _, f := range a.files {
			if _, ok := byFile[f]; !ok || byFile[f].Status == "removed" {
				continue
			}
			m := marks[f]
			if m == nil {
				m = &mark{}
				marks[f] = m
			}
			if a.failed != "" {
				m.failed = append(m.failed, a.name+": "+oneLine(a.failed))
			} else {
				m.changing = append(m.changing, a.name)
			}
		}
	}
	paths := make([]string, 0, len(marks))
	for p := range marks {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var out []github.Annotation
	for _, p := range paths {
		m := marks[p]
		level, title, msg := "notice", fmt.Sprintf("Changes %d Applications", len(m.changing)), listed(m.changing)
		if len(m.failed) > 0 {
			level, title, msg = "failure", fmt.Sprintf("%d Applications no longer render", len(m.failed)), listed(m.failed)
		}
		lines := byFile[p].Lines
		if len(lines) == 0 {
			lines = [][2]int{{1, 1}}
		}
		for _, l := range lines {
			if len(out) == maxAnnotations {
				return out
			}
			out = append(out, github.Annotation{Path: p, StartLine: l[0], EndLine: l[1], Level: level, Title: title, Message: msg})
		}
	}
	return out
}

func (r *report) checkReport(h Head) github.CheckReport {
	return github.CheckReport{ExternalID: h.Key, Conclusion: r.conclusion(), Title: r.title(), Summary: r.summary(),
		Text: r.text(), Annotations: r.annotations()}
}

// listed names the first few items, one a line, and how many more there are.
func listed(items []string) string { return listedWith(items, "\n", "\n") }

// listedInline names the first few items on one line, and how many more there are.
func listedInline(items []string) string { return listedWith(items, ", ", " ") }

func listedWith(items []string, sep, beforeMore string) string {
	shown := items[:min(len(items), maxListedApps)]
	s := strings.Join(shown, sep)
	if more := len(items) - len(shown); more > 0 {
		s += fmt.Sprintf("%sand %d more", beforeMore, more)
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
