package policy

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/markdown"
)

// maxAnnotations keeps a policy broken by hundreds of objects to a few requests;
// the summary counts every finding.
const maxAnnotations = 200

// maxListed is how many findings the summary lists that have no line to mark.
const maxListed = 50

// DryRun is the outcome of the server-side dry-run of a head's changed objects
// against the destination cluster.
type DryRun struct {
	// Outcome is DryRunPassed, DryRunRejected, DryRunUnreachable or DryRunSkipped.
	Outcome string
	// Note says what the cluster answered or why nothing was sent (masked: never a
	// Secret value).
	Note string
}

// Dry-run outcomes.
const (
	DryRunPassed      = "passed"
	DryRunRejected    = "rejected"
	DryRunUnreachable = "unreachable"
	DryRunSkipped     = "skipped"
)

// Report is the kukie/policy check of one head.
type Report struct {
	// Repo is the repository, DefaultBranch the branch its .kukie.yml was read from.
	Repo, DefaultBranch string
	// Config is the parsed policy: nil when the repository has none, or when
	// ConfigErr says why it cannot be used.
	Config    *Config
	ConfigErr *ParseError
	// Apps is the number of Applications whose render was checked.
	Apps     int
	Findings []Finding
	// NotChecked says which Applications were not checked, and why.
	NotChecked []Unchecked
	// DryRun is the head's dry-run, when one ran; DryRunAbsent says why not, in
	// the service's own words, or DryRunNotSent names the Applications whose
	// objects were not sent because they deploy to a cluster not registered.
	DryRun        *DryRun
	DryRunAbsent  string
	DryRunNotSent []string
}

// NotSent says that the objects of apps, each written by name, were not sent: they
// deploy to a cluster the team has not registered.
func NotSent(apps []string, name func(string) string) string {
	named := make([]string, len(apps))
	for i, a := range apps {
		named[i] = name(a)
	}
	return "not sent for " + strings.Join(named, ", ") + ": they deploy to a cluster other than the one their Application is read from, " +
		"which the team has not registered with the service at that address"
}

// Unchecked is an Application (or a cluster) whose render was not checked.
type Unchecked struct {
	// Name names it ("argocd/web", "cluster prod"); Why is the service's words
	// for why, Quote the words from elsewhere (Argo CD's, Kustomize's, Helm's) it
	// quotes, either may be "".
	Name, Why, Quote string
}

// String is u as one line of plain text: "argocd/web: does not render at the
// head (kustomize: …)".
func (u Unchecked) String() string { return u.written(oneLine, asIs) }

// markdown is u as a line of the summary: the name as markdown.Name writes it and
// the quoted words as code, which as Markdown could mention people and link.
func (u Unchecked) markdown() string { return u.written(markdown.CodeLine, markdown.Name) }

func (u Unchecked) written(quote, name func(string) string) string {
	s := u.Why
	switch {
	case u.Quote != "" && s != "":
		s += " (" + quote(u.Quote) + ")"
	case u.Quote != "":
		s = quote(u.Quote)
	}
	if u.Name == "" {
		return s
	}
	return name(u.Name) + ": " + s
}

// AddDryRun turns the head's dry-run into a finding of the dry_run rule: the
// cluster's refusal at the rule's level, an unreachable cluster at most as a
// warning (it says nothing about the change).
func (r *Report) AddDryRun(d DryRun) {
	r.DryRun = &d
	if r.Config == nil {
		return
	}
	level := r.Config.Rules.DryRun.Level
	switch {
	case level == LevelOff:
	case d.Outcome == DryRunRejected:
		r.Findings = append(r.Findings, Finding{Rule: RuleDryRun, Level: level, Message: "the destination cluster refused the changed objects in a server-side dry-run: " + d.Note})
	case d.Outcome == DryRunUnreachable:
		if level == LevelError {
			level = LevelWarning
		}
		r.Findings = append(r.Findings, Finding{Rule: RuleDryRun, Level: level, Message: "the changed objects could not be dry-run against the destination cluster: " + d.Note})
	}
}

func (r *Report) configured() bool { return r.Config != nil && r.Config.Enabled() }

// Conclusion is failure when the policy cannot be read or a finding is an error,
// neutral when no rule is on or nothing was checked, success otherwise.
func (r *Report) Conclusion() string {
	if r.ConfigErr != nil {
		return github.ConclusionFailure
	}
	if !r.configured() {
		return github.ConclusionNeutral
	}
	for _, f := range r.Findings {
		if f.Level == LevelError {
			return github.ConclusionFailure
		}
	}
	if r.Apps == 0 && r.DryRun == nil {
		return github.ConclusionNeutral
	}
	return github.ConclusionSuccess
}

func (r *Report) counts() map[Level]int {
	n := map[Level]int{}
	for _, f := range r.Findings {
		n[f.Level]++
	}
	return n
}

// Title is the run's one line.
func (r *Report) Title() string {
	switch {
	case r.ConfigErr != nil:
		return ConfigFile + " is not valid"
	case !r.configured():
		return "No policy configured"
	case r.Apps == 0 && r.DryRun == nil:
		return "No Application reads the changed files"
	}
	n := r.counts()
	if len(r.Findings) == 0 {
		return fmt.Sprintf("%d Applications meet the policy", r.Apps)
	}
	return fmt.Sprintf("%d errors, %d warnings, %d notices", n[LevelError], n[LevelWarning], n[LevelNotice])
}

// Summary says which policy applied and what it found.
func (r *Report) Summary() string {
	var b strings.Builder
	switch {
	case r.ConfigErr != nil:
		fmt.Fprintf(&b, "The policy in `%s` on %s cannot be used, so nothing was checked against it:\n\n> %s\n", ConfigFile, markdown.Name(r.DefaultBranch), markdown.CodeLine(r.ConfigErr.Error()))
		return b.String()
	case r.Config == nil:
		fmt.Fprintf(&b, "%s has no `%s` on its default branch (%s), so no policy rule is on. The file's schema is in the service's README.\n", r.Repo, ConfigFile, markdown.Name(r.DefaultBranch))
		return b.String()
	case !r.configured():
		fmt.Fprintf(&b, "`%s` on %s turns no rule on.\n", ConfigFile, markdown.Name(r.DefaultBranch))
		return b.String()
	}
	fmt.Fprintf(&b, "The rules of `%s` on %s, checked on the render of the %d Applications this change reaches.\n\n", ConfigFile, markdown.Name(r.DefaultBranch), r.Apps)
	b.WriteString("| Rule | Level | Findings |\n|---|---|---|\n")
	rules := r.Config.Rules
	per := map[string]int{}
	for _, f := range r.Findings {
		per[f.Rule]++
	}
	for _, row := range []struct {
		name  string
		level Level
	}{{RuleImageDigest, rules.ImageDigest.Level}, {RuleImageRegistries, rules.ImageRegistries.Level}, {RuleNamespaces, rules.Namespaces.Level},
		{RuleSecretValues, rules.SecretValues.Level}, {RuleDeniedKinds, rules.DeniedKinds.Level}, {RuleDryRun, rules.DryRun.Level}} {
		if row.level == LevelOff {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %d |\n", row.name, row.level, per[row.name])
	}
	if d := r.dryRunOutcome(markdown.CodeLine, markdown.Name); d != "" {
		b.WriteString("\nServer-side dry-run: " + d + "\n")
	}
	var unplaced []string
	for _, f := range r.Findings {
		if f.Path == "" {
			unplaced = append(unplaced, "- "+f.line())
		}
	}
	if len(unplaced) > 0 {
		b.WriteString("\n### Findings without a manifest line\n")
		if len(unplaced) > maxListed {
			unplaced = append(unplaced[:maxListed], fmt.Sprintf("- and %d more", len(unplaced)-maxListed))
		}
		b.WriteString(strings.Join(unplaced, "\n") + "\n")
	}
	if len(r.NotChecked) > 0 {
		b.WriteString("\n### Not checked\n")
		for _, n := range r.NotChecked {
			b.WriteString("- " + n.markdown() + "\n")
		}
	}
	return b.String()
}

// DryRunOutcome says what became of the head's dry-run ("passed (…).", "not run:
// …"), as plain text; "" when the rule is off or nothing is known of it.
func (r *Report) DryRunOutcome() string {
	return r.dryRunOutcome(oneLine, asIs)
}

// dryRunOutcome is DryRunOutcome with the cluster's words written by quote and
// the Applications not sent by name: the summary writes them as code and as
// markdown.Name does.
func (r *Report) dryRunOutcome(quote, name func(string) string) string {
	if r.Config == nil || r.Config.Rules.DryRun.Level == LevelOff {
		return ""
	}
	switch {
	case r.DryRun != nil:
		s := r.DryRun.Outcome
		if r.DryRun.Note != "" {
			s += " (" + quote(r.DryRun.Note) + ")"
		}
		return s + "."
	case len(r.DryRunNotSent) > 0:
		return "not run: " + NotSent(r.DryRunNotSent, name)
	case r.DryRunAbsent != "":
		return "not run: " + r.DryRunAbsent
	}
	return ""
}

// line is the finding as a line of the summary. The Application is written as
// markdown.Name writes it, the object and the message as code: they quote the rendered manifests' names, images and values and
// the cluster's refusals, which as Markdown could mention people and link.
func (f Finding) line() string {
	var who []string
	if f.App != "" {
		who = append(who, markdown.Name(f.App))
	}
	if f.Object != "" {
		who = append(who, markdown.Code(f.Object))
	}
	s := fmt.Sprintf("**%s** (%s)", f.Rule, f.Level)
	if len(who) > 0 {
		s += " " + strings.Join(who, ", ") + ":"
	}
	return s + " " + markdown.CodeLine(f.Message)
}

// Annotations mark the manifest line of each finding (the same line once per
// rule, naming each object), and an invalid .kukie.yml at its line.
func (r *Report) Annotations() []github.Annotation {
	if r.ConfigErr != nil {
		line := max(r.ConfigErr.Line, 1)
		return []github.Annotation{{Path: ConfigFile, StartLine: line, EndLine: line, Level: "failure", Title: ConfigFile + " is not valid", Message: r.ConfigErr.Msg}}
	}
	type spot struct {
		path, rule string
		line       int
	}
	byspot := map[spot][]Finding{}
	var order []spot
	for _, f := range r.Findings {
		if f.Path == "" {
			continue
		}
		s := spot{f.Path, f.Rule, f.Line}
		if _, ok := byspot[s]; !ok {
			order = append(order, s)
		}
		byspot[s] = append(byspot[s], f)
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].path != order[j].path {
			return order[i].path < order[j].path
		}
		return order[i].line < order[j].line
	})
	var out []github.Annotation
	for _, s := range order {
		if len(out) == maxAnnotations {
			break
		}
		fs := byspot[s]
		level := fs[0].Level
		var msgs []string
		seen := map[string]bool{}
		for _, f := range fs {
			if levelRank(f.Level) > levelRank(level) {
				level = f.Level
			}
			m := f.App + ", " + f.Object + ": " + f.Message
			if !seen[m] {
				seen[m] = true
				msgs = append(msgs, m)
			}
		}
		if len(msgs) > 5 {
			msgs = append(msgs[:5], fmt.Sprintf("and %d more", len(msgs)-5))
		}
		out = append(out, github.Annotation{Path: s.path, StartLine: max(s.line, 1), EndLine: max(s.line, 1), Level: level.annotationLevel(),
			Title: "Policy: " + s.rule, Message: strings.Join(msgs, "\n")})
	}
	return out
}

func levelRank(l Level) int {
	switch l {
	case LevelError:
		return 3
	case LevelWarning:
		return 2
	case LevelNotice:
		return 1
	}
	return 0
}

// CheckReport is the run to publish on the head, as externalID names it.
func (r *Report) CheckReport(externalID string) github.CheckReport {
	return github.CheckReport{Name: github.PolicyCheckRunName, ExternalID: externalID, Conclusion: r.Conclusion(), Title: r.Title(),
		Summary: r.Summary(), Annotations: r.Annotations()}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func asIs(s string) string { return s }
