package plan

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/markdown"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// PRTitle is "kukie: <verb> <kind>/<name> (<code>)", the target as ShownTarget
// names it.
func PRTitle(pl store.Plan, pay Payload) string {
	verb := "change"
	if c, err := ChangeOf(pl); err == nil {
		verb = Verb(c)
	}
	if pl.RollbackOf != "" {
		verb = "revert " + pl.RollbackOf + ":"
	}
	t := ShownTarget(pl, pay)
	return fmt.Sprintf("kukie: %s %s/%s (%s)", verb, t.Kind, t.Name, pl.Code)
}

// PRBody says what, why, who asked, which Argo CD app and how it syncs, warnings, the
// diff summary and what will change in the cluster. It never carries secret values:
// diffs come from render, which masks them.
func PRBody(pl store.Plan, pay Payload) string {
	var b strings.Builder
	t := ShownTarget(pl, pay)
	fmt.Fprintf(&b, "### Request\n%s %s/%s", verbOf(pl), t.Kind, t.Name)
	if t.Namespace != "" {
		fmt.Fprintf(&b, " in namespace `%s`", t.Namespace)
	}
	fmt.Fprintf(&b, " on cluster `%s`.\n\n", pl.Cluster)
	if pl.RollbackOf != "" {
		// The merge commit is the one GitHub's webhook named.
		fmt.Fprintf(&b, "This reverts plan `%s` (%s).\n\n", pl.RollbackOf, markdown.CodeLine(RevertedMerge(pl, pay)))
	}
	fmt.Fprintf(&b, "**Reason:** %s\n\n**Requested by:** %s\n\n", oneLine(pl.Reason), oneLine(pl.RequestedBy))
	if pay.App != nil {
		// The name, path and revision are the team's Application's, as written
		// there, and its source type is what its status says.
		where := "path"
		if pay.App.Chart != "" {
			// The chart is fetched from a Helm repository; the path and
			// revision are those of its values.
			where = "chart " + markdown.Code(pay.App.Chart) + ", values at path"
		}
		fmt.Fprintf(&b, "### Argo CD\nApplication %s (%s, %s %s, revision %s), sync policy: %s.\n\n",
			markdown.Code(pay.App.Namespace+"/"+pay.App.Name), markdown.Name(pay.App.SourceType), where, markdown.Code(pay.App.Path), markdown.Code(pay.App.TargetRevision), syncPolicy(pay))
	}
	if warnings := allWarnings(pay); len(warnings) > 0 {
		b.WriteString("### Warnings\n")
		for _, w := range warnings {
			fmt.Fprintf(&b, "- %s\n", warningText(w))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "### Git diff\n%s\n\n", diffSummary(pay))
	b.WriteString(fence(pay.GitDiff))
	b.WriteString("\n### What will change in the cluster\n")
	b.WriteString(clusterDiffText(pay))
	fmt.Fprintf(&b, "\n%s\n", clusterCheckLine(pay))
	if line := notCheckedLine(pay); line != "" {
		fmt.Fprintf(&b, "\n%s\n", line)
	}
	b.WriteString("\n" + github.PlanMarker(pl.Code) + "\n")
	return github.FitOutput(b.String(), 60000, "")
}

func verbOf(pl store.Plan) string {
	if pl.RollbackOf != "" {
		return "Revert the change of plan `" + pl.RollbackOf + "` to"
	}
	if c, err := ChangeOf(pl); err == nil {
		v := Verb(c)
		return strings.ToUpper(v[:1]) + v[1:]
	}
	return "Change"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func syncPolicy(pay Payload) string {
	switch {
	case pay.App == nil:
		return "unknown"
	case pay.App.SelfHeal:
		return "automated with self-heal (Argo CD applies the merge within minutes and reverts manual changes)"
	case pay.App.Automated:
		return "automated (Argo CD applies the merge on its next sync)"
	default:
		return "manual (someone must sync the Application after the merge)"
	}
}

// warningText writes a warning as a code span: warnings quote the repository's
// paths and values and the team's Argo CD's words, which as Markdown could
// mention people, link and show images.
func warningText(w string) string { return markdown.CodeLine(w) }

func allWarnings(pay Payload) []string {
	var out []string
	if pay.ArgoCD != nil && pay.ArgoCD.Warning != "" {
		out = append(out, pay.ArgoCD.Warning)
	}
	return append(out, pay.Warnings...)
}

func diffSummary(pay Payload) string {
	added, removed := 0, 0
	for _, line := range strings.Split(pay.GitDiff, "\n") {
		switch {
		case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"):
		case strings.HasPrefix(line, "+"):
			added++
		case strings.HasPrefix(line, "-"):
			removed++
		}
	}
	return fmt.Sprintf("%d file(s) changed, %d line(s) added, %d removed.", len(pay.Edits), added, removed)
}

func fence(diff string) string {
	if diff == "" {
		return "_no diff_\n"
	}
	return markdown.CodeBlock("diff", diff)
}

func clusterDiffText(pay Payload) string {
	if len(pay.ClusterDiff) == 0 {
		return "_nothing_\n"
	}
	var b strings.Builder
	counts := map[string]int{}
	for _, d := range pay.ClusterDiff {
		counts[d.Action]++
	}
	fmt.Fprintf(&b, "%d added, %d modified, %d removed\n\n", counts["added"], counts["modified"], counts["removed"])
	for _, d := range pay.ClusterDiff {
		ns := d.Namespace
		if ns != "" {
			ns += "/"
		}
		action := d.Action
		if note := render.RenameNote(pay.Renames, d); note != "" {
			action += ", " + markdown.Name(note)
		}
		// The kind and name are the rendered manifests', as the repository writes them.
		fmt.Fprintf(&b, "**%s** (%s, app %s)\n", markdown.Name(d.Kind+" "+ns+d.Name), action, markdown.Code(d.App))
		b.WriteString(fence(d.Diff))
	}
	return b.String()
}

func clusterCheckLine(pay Payload) string {
	switch pay.ClusterCheck {
	case ClusterCheckPassed:
		return "Cluster check: **checked against the cluster**: the changed objects were accepted by a server-side dry-run."
	case ClusterCheckUnreachable, ClusterCheckSkipped:
		return "Cluster check: **not checked against the cluster** (" + clusterCheckNote(pay) + ")."
	}
	return ""
}

// clusterCheckNote is why the cluster check did not pass: the cluster's own words
// (its API server's, an admission webhook's) are written as code.
func clusterCheckNote(pay Payload) string {
	if pay.ClusterCheck == ClusterCheckUnreachable {
		return markdown.CodeLine(pay.ClusterCheckNote)
	}
	return pay.ClusterCheckNote
}

// notCheckedLine names the team's clusters whose Applications were not verified.
func notCheckedLine(pay Payload) string {
	if len(pay.NotChecked) == 0 {
		return ""
	}
	return "Other clusters: **not checked**: " + strings.Join(pay.NotChecked, ", ") +
		". Applications there that deploy from this repository and branch may change too."
}

// CheckReport builds the kukie/render check run of pl's head. failure, when set, is
// the reason a re-verification failed. Without a failure it concludes success only
// for the head the payload records as verified (Payload.VerifiedHead); any other head
// gets an in-progress run saying it was not compared yet. A change refused on the
// base its branch moved to (Payload.BaseRefusal) asks for action with the reason; a
// pull request retargeted at another branch than the plan's base
// (Payload.RetargetedTo) fails saying which branch the Application tracks.
func (p *Pipeline) CheckReport(pl store.Plan, pay Payload, failure string) github.CheckReport {
	if failure == "" && pay.VerifiedHead != pl.HeadSHA {
		return p.unverifiedReport(pl, errors.New("the comparison of commit "+pl.HeadSHA+" with the verified change has not completed"), true)
	}
	r := github.CheckReport{ExternalID: pl.Code, DetailsURL: p.detailsURL(pl)}
	var b strings.Builder
	switch {
	case pay.RetargetedTo != "":
		r.Conclusion, r.Title = github.ConclusionFailure, "Targets another branch"
		fmt.Fprintf(&b, "**The pull request now targets %s while %s tracks %s.** Merged into %s, the change does not reach the cluster; "+
			"change the pull request's base back to %s to verify it again.\n\n", markdown.Name(pay.RetargetedTo), markdown.Name(appName(pay)), markdown.Name(pl.BaseBranch),
			markdown.Name(pay.RetargetedTo), markdown.Name(pl.BaseBranch))
	case failure != "":
		r.Conclusion, r.Title = github.ConclusionFailure, "Not verified"
		// The failure names the branch's files, which whoever pushes to it names.
		fmt.Fprintf(&b, "**The branch no longer matches the verified change.**\n\n%s\n\n", markdown.CodeLine(failure))
	case pay.BaseRefusal != "":
		r.Conclusion, r.Title = github.ConclusionActionRequired, "Refused on the new base"
		fmt.Fprintf(&b, "**%s.** The branch still holds the change as verified on its old base; close the change or ask for it again.\n\n", markdown.CodeLine(strings.TrimSuffix(pay.BaseRefusal, ".")))
	case pay.ClusterCheck == ClusterCheckUnreachable:
		r.Conclusion, r.Title = github.ConclusionActionRequired, "Verified in Git; not checked against the cluster"
		fmt.Fprintf(&b, "The edit renders exactly as requested, but it was **not checked against the cluster**: %s.\n\n", clusterCheckNote(pay))
	case len(pay.NotChecked) > 0:
		r.Conclusion, r.Title = github.ConclusionActionRequired, "Verified; not checked in every cluster"
		b.WriteString("The edit renders exactly as requested and changes no other Application the service could read, " +
			"but **the Applications of some of the team's clusters could not be read**.\n\n")
	default:
		r.Conclusion, r.Title = github.ConclusionSuccess, "Verified"
		b.WriteString("The edit renders exactly as requested and nothing else changes.\n\n")
	}
	b.WriteString("| Application | objects compared | objects changed | fields changed |\n|---|---|---|---|\n")
	if pay.Verification != nil {
		fields := map[string]int{}
		for _, d := range pay.ClusterDiff {
			fields[d.App] += len(d.Changes)
		}
		for _, a := range pay.Verification.Apps {
			fmt.Fprintf(&b, "| %s | %d | %d | %d |\n", markdown.Cell(markdown.Name(a.App)), a.Objects, a.Changed, fields[a.App])
		}
	}
	if warnings := allWarnings(pay); len(warnings) > 0 {
		b.WriteString("\n**Warnings**\n")
		for _, w := range warnings {
			fmt.Fprintf(&b, "- %s\n", warningText(w))
		}
	}
	if line := clusterCheckLine(pay); line != "" {
		b.WriteString("\n" + line + "\n")
	}
	if line := notCheckedLine(pay); line != "" {
		b.WriteString("\n" + line + "\n")
	}
	r.Summary = b.String()
	r.Text = "### What will change in the cluster\n" + clusterDiffText(pay)
	for _, e := range pay.Edits {
		r.Annotations = append(r.Annotations, annotationsFor(e)...)
	}
	return r
}

// appName names the plan's Application for people.
func appName(pay Payload) string {
	if pay.App == nil {
		return "its Application"
	}
	return "Application " + pay.App.Namespace + "/" + pay.App.Name
}

// unverifiedReport is the run of a head whose comparison with the verified change did
// not complete: in progress while the service tries again, action_required when it
// does not. It marks no lines, since nothing about them is known.
func (p *Pipeline) unverifiedReport(pl store.Plan, cause error, retrying bool) github.CheckReport {
	reason, _ := failureWords(cause)
	r := github.CheckReport{ExternalID: pl.Code, DetailsURL: p.detailsURL(pl), Title: "Not verified yet"}
	next := "The service tries again on its own; nothing needs to be done."
	if at, ok := github.RetryAt(cause, time.Now()); ok {
		r.Title = "Waiting for GitHub's rate limit"
		next = "The service is waiting for GitHub's rate limit (until " + at.UTC().Format(time.TimeOnly+" MST") +
			") and tries again on its own; nothing needs to be done."
	}
	if !retrying {
		r.Conclusion, r.Title = github.ConclusionActionRequired, "Could not verify"
		next = "Retry the change (POST /api/v1/changes/" + pl.Code + "/retry) once the cause is fixed."
	}
	r.Summary = fmt.Sprintf("**Commit %s has not been verified.** Its check against the base plus the verified edit did not finish: %s.\n\n%s\n",
		pl.HeadSHA, markdown.CodeLine(reason), next)
	return r
}

// annotationsFor marks the changed lines of one edit.
func annotationsFor(e StoredEdit) []github.Annotation {
	oldLines := strings.Split(string(e.Old), "\n")
	newLines := strings.Split(string(e.New), "\n")
	var out []github.Annotation
	for i, line := range newLines {
		if i < len(oldLines) && oldLines[i] == line && !e.Created {
			continue
		}
		out = append(out, github.Annotation{Path: e.Path, StartLine: i + 1, EndLine: i + 1, Level: "notice",
			Title: "changed by kukie", Message: "This line is part of the verified change."})
		if len(out) >= 200 {
			break // beyond this the annotations say nothing more than the diff
		}
		if len(oldLines) != len(newLines) && !e.Created {
			// Lines shifted: mark the first changed line only.
			break
		}
	}
	return out
}

// ChangePagePath is the path of a change's web page (package web serves it) before
// the change's code: the check run's details link, which a person on GitHub opens in
// a browser and signs in to, where the token-protected API would answer 401.
const ChangePagePath = "/changes/"

func (p *Pipeline) detailsURL(pl store.Plan) string {
	if p.cfg.PublicURL == "" {
		return ""
	}
	return strings.TrimSuffix(p.cfg.PublicURL, "/") + ChangePagePath + url.PathEscape(pl.Code)
}

// ShownTarget is the plan's target as people read it: its kind as the cluster
// serves it, which the path decision read (a target may name its kind in another
// case, "deployment" as kubectl takes it), and the rest as requested. The stored
// target stays as requested: a retry of the request sends it so again.
func ShownTarget(pl store.Plan, pay Payload) objref.Target {
	t := pl.Target
	ref, err := argocd.RefOf(t)
	if err != nil || pay.ArgoCD == nil {
		return t
	}
	for _, r := range pay.ArgoCD.Resources {
		if r.Group == ref.Group && r.Name == t.Name && strings.EqualFold(r.Kind, t.Kind) {
			t.Kind = r.Kind
			break
		}
	}
	return t
}
