package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/markdowntest"
)

func mustParse(t *testing.T, s string) *Config {
	t.Helper()
	c, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestReportConclusion(t *testing.T) {
	warn := Finding{Rule: RuleImageDigest, Level: LevelWarning, App: "a", Object: "Pod x", Message: "m", Path: "p.yaml", Line: 3}
	errf := warn
	errf.Level = LevelError
	_, perr := Parse([]byte("rules:\n  nope: {}\n"))
	var pe *ParseError
	if !errors.As(perr, &pe) {
		t.Fatal(perr)
	}
	on := "rules:\n  image_digest: {level: warning}\n  dry_run: {level: error}\n"
	cases := map[string]struct {
		r          Report
		dryRun     *DryRun
		conclusion string
		title      string
	}{
		"no file":                {r: Report{}, conclusion: github.ConclusionNeutral, title: "No policy configured"},
		"no rule on":             {r: Report{Config: mustParse(t, "version: 1\n"), Apps: 2}, conclusion: github.ConclusionNeutral, title: "No policy configured"},
		"an invalid file":        {r: Report{ConfigErr: pe}, conclusion: github.ConclusionFailure, title: ".kukie.yml is not valid"},
		"no app reached":         {r: Report{Config: mustParse(t, on)}, conclusion: github.ConclusionNeutral, title: "No Application reads"},
		"clean":                  {r: Report{Config: mustParse(t, on), Apps: 2}, conclusion: github.ConclusionSuccess, title: "2 Applications meet the policy"},
		"warnings only":          {r: Report{Config: mustParse(t, on), Apps: 1, Findings: []Finding{warn}}, conclusion: github.ConclusionSuccess, title: "0 errors, 1 warnings"},
		"an error":               {r: Report{Config: mustParse(t, on), Apps: 1, Findings: []Finding{warn, errf}}, conclusion: github.ConclusionFailure, title: "1 errors, 1 warnings"},
		"a dry-run refusal":      {r: Report{Config: mustParse(t, on), Apps: 1}, dryRun: &DryRun{Outcome: DryRunRejected, Note: "Deployment x: spec.replicas: Invalid value"}, conclusion: github.ConclusionFailure, title: "1 errors"},
		"an unreachable cluster": {r: Report{Config: mustParse(t, on), Apps: 1}, dryRun: &DryRun{Outcome: DryRunUnreachable, Note: "connection refused"}, conclusion: github.ConclusionSuccess, title: "0 errors, 1 warnings"},
		"a passed dry-run":       {r: Report{Config: mustParse(t, on), Apps: 1}, dryRun: &DryRun{Outcome: DryRunPassed}, conclusion: github.ConclusionSuccess, title: "meet the policy"},
		"a dry-run rule off":     {r: Report{Config: mustParse(t, "rules:\n  image_digest: {level: error}\n"), Apps: 1}, dryRun: &DryRun{Outcome: DryRunRejected, Note: "no"}, conclusion: github.ConclusionSuccess, title: "meet the policy"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := tc.r
			if tc.dryRun != nil {
				r.AddDryRun(*tc.dryRun)
			}
			rep := r.CheckReport("pull/1")
			if rep.Name != github.PolicyCheckRunName || rep.Conclusion != tc.conclusion || !strings.Contains(rep.Title, tc.title) {
				t.Fatalf("%s %s %q, want %s with %q:\n%s", rep.Name, rep.Conclusion, rep.Title, tc.conclusion, tc.title, rep.Summary)
			}
		})
	}
}

func TestReportAnnotations(t *testing.T) {
	_, perr := Parse([]byte("version: 1\nrules:\n  image_digest:\n    level: eror\n"))
	var pe *ParseError
	if !errors.As(perr, &pe) {
		t.Fatal(perr)
	}
	anns := (&Report{ConfigErr: pe, DefaultBranch: "main"}).Annotations()
	if len(anns) != 1 || anns[0].Path != ConfigFile || anns[0].StartLine != 4 || anns[0].Level != "failure" || !strings.Contains(anns[0].Message, `"eror"`) {
		t.Fatalf("annotations %+v, want one failure on .kukie.yml line 4", anns)
	}

	c := mustParse(t, "rules:\n  image_digest: {level: warning}\n  secret_values: {level: error}\n")
	r := Report{Config: c, Apps: 2, Findings: []Finding{
		{Rule: RuleImageDigest, Level: LevelWarning, App: "a", Object: "Deployment x/web", Message: "not pinned", Path: "base/d.yaml", Line: 9},
		{Rule: RuleImageDigest, Level: LevelWarning, App: "b", Object: "Deployment y/web", Message: "not pinned", Path: "base/d.yaml", Line: 9},
		{Rule: RuleSecretValues, Level: LevelError, App: "a", Object: "Secret x/s", Message: "values", Path: "base/s.yaml", Line: 5},
		{Rule: RuleSecretValues, Level: LevelError, App: "h", Object: "Secret x/t", Message: "from a chart"},
	}}
	anns = r.Annotations()
	if len(anns) != 2 || anns[0].Path != "base/d.yaml" || anns[0].StartLine != 9 || anns[0].Level != "warning" ||
		!strings.Contains(anns[0].Message, "a, Deployment x/web") || !strings.Contains(anns[0].Message, "b, Deployment y/web") ||
		anns[1].Path != "base/s.yaml" || anns[1].StartLine != 5 || anns[1].Level != "failure" {
		t.Fatalf("annotations %+v", anns)
	}
	if sum := r.Summary(); !strings.Contains(sum, "| image_digest | warning | 2 |") || !strings.Contains(sum, "### Findings without a manifest line") ||
		!strings.Contains(sum, "h, `Secret x/t`: `from a chart`") {
		t.Fatalf("summary:\n%s", sum)
	}
}

// TestSummaryShowsManifestAndClusterWordsOnlyAsCode: a finding without a manifest
// line names an object and quotes a message (a rendered image, a cluster's refusal),
// and an unusable policy file is quoted by its parse error; as Markdown they
// mentioned people and showed images in the check run.
func TestSummaryShowsManifestAndClusterWordsOnlyAsCode(t *testing.T) {
	const hostile = "@acme/admins ![x](https://tracker.example/p.png)"
	on := &Config{Rules: Rules{DryRun: Rule{Level: LevelError}}}
	for _, r := range []*Report{
		{Config: on, Apps: 1, Findings: []Finding{{Rule: RuleDryRun, Level: LevelError, App: "a", Object: "ConfigMap shop/" + hostile, Message: "admission webhook denied: " + hostile}}},
		{ConfigErr: &ParseError{Msg: "yaml: unknown field " + hostile}},
		{Config: on, Apps: 1, DryRun: &DryRun{Outcome: DryRunRejected, Note: "cluster prod could not be asked: " + hostile}},
		{Config: on, Apps: 1, DryRunAbsent: "no object of the change is added or modified in a cluster", DryRunNotSent: []string{"argocd/web", "argocd/" + hostile}},
		{Config: on, Apps: 1, NotChecked: []Unchecked{{Name: "argocd/web", Why: "does not render at the head", Quote: "kustomize: " + hostile},
			{Name: "argocd/" + hostile, Quote: "a Helm chart from another repository"}, {Name: "argocd/jobs", Quote: hostile}}},
		{Config: on, Apps: 1, Findings: []Finding{{Rule: RuleDryRun, Level: LevelError, App: hostile, Message: "refused"}}},
	} {
		sum := r.Summary()
		read := markdowntest.Parse(sum)
		if strings.Contains(read.Prose, "@acme") || len(read.Destinations) != 0 || !strings.Contains(sum, "tracker.example") {
			t.Errorf("manifest or cluster words read as Markdown: %q, links %q\n%s", read.Prose, read.Destinations, sum)
		}
	}
}

// TestDryRunAndNotCheckedReadAsSentences: the summary quotes the cluster's words
// and the reasons as code in a sentence, and the page's plain text keeps them as
// they are.
func TestDryRunAndNotCheckedReadAsSentences(t *testing.T) {
	on := &Config{Rules: Rules{DryRun: Rule{Level: LevelError}}}
	r := &Report{Config: on, Apps: 1, DryRun: &DryRun{Outcome: DryRunPassed, Note: "1 changed objects sent, 0 refused"},
		NotChecked: []Unchecked{{Name: "argocd/web", Why: "does not render at the head", Quote: "kustomize:\n  no such file"},
			{Name: "argocd/jobs", Quote: "a Helm chart from another repository"}, {Why: "cluster edge: its Applications could not be read"}}}
	sum := r.Summary()
	for _, want := range []string{"Server-side dry-run: passed (`1 changed objects sent, 0 refused`).\n",
		"- argocd/web: does not render at the head (`kustomize: no such file`)\n", "- argocd/jobs: `a Helm chart from another repository`\n",
		"- cluster edge: its Applications could not be read\n"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	if got, want := r.DryRunOutcome(), "passed (1 changed objects sent, 0 refused)."; got != want {
		t.Errorf("DryRunOutcome = %q, want %q", got, want)
	}
	if got, want := r.NotChecked[0].String(), "argocd/web: does not render at the head (kustomize: no such file)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	r = &Report{Config: on, Apps: 1, DryRunAbsent: "this pull request's head is a fork's branch"}
	if sum := r.Summary(); !strings.Contains(sum, "Server-side dry-run: not run: this pull request's head is a fork's branch\n") {
		t.Errorf("summary:\n%s", sum)
	}
	r.DryRunNotSent = []string{"argocd/shop (cluster prod)", "argocd/web"}
	if sum, want := r.Summary(), "Server-side dry-run: not run: not sent for `argocd/shop (cluster prod)`, argocd/web: they deploy"; !strings.Contains(sum, want) {
		t.Errorf("summary lacks %q:\n%s", want, sum)
	}
	if got, want := r.DryRunOutcome(), "not run: not sent for argocd/shop (cluster prod), argocd/web: they deploy"; !strings.HasPrefix(got, want) {
		t.Errorf("DryRunOutcome = %q, want it to begin %q", got, want)
	}
}
