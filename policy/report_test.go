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
	} {
		sum := r.Summary()
		read := markdowntest.Parse(sum)
		if strings.Contains(read.Prose, "@acme") || len(read.Destinations) != 0 || !strings.Contains(sum, "tracker.example") {
			t.Errorf("manifest or cluster words read as Markdown: %q, links %q\n%s", read.Prose, read.Destinations, sum)
		}
	}
}
