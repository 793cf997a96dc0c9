package prcheck

import (
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/markdowntest"
	"github.com/kukie/kukie-gitops/policy"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// TestCheckRunTextShowsDiffsOnlyAsCode: the pull request being checked is anyone's
// with write access, and its files reach the check run's text through their diffs;
// a context line " ```" closed the fixed fence, and the rest was read as Markdown.
func TestCheckRunTextShowsDiffsOnlyAsCode(t *testing.T) {
	const injected = " ```\n @acme/admins approved\n ![x](https://tracker.example/p.png)\n"
	r := report{apps: []appResult{{name: "web", cluster: "prod", diffs: []render.ObjectDiff{
		{App: "web", Kind: "ConfigMap", Name: "a", Action: "modified", Diff: "@@ -1 +1 @@\n" + injected + "-a\n+b\n"},
		{App: "web", Kind: "ConfigMap", Name: "b", Action: "added", Diff: "+kind: ConfigMap\n"},
	}}}}
	got := markdowntest.Parse(r.text())
	if strings.Contains(got.Prose, "@acme/admins") || len(got.Destinations) != 0 {
		t.Fatalf("diff text read as Markdown: %q, links %q\ntext:\n%s", got.Prose, got.Destinations, r.text())
	}
	if len(got.CodeBlocks) != 1 || !strings.Contains(got.CodeBlocks[0], injected+"-a\n+b\n+kind: ConfigMap\n") {
		t.Fatalf("the app's diffs are not one code block as written: %q", got.CodeBlocks)
	}
}

// TestCheckRunSummaryShowsFailureReasonsOnlyAsCode: why an app no longer renders,
// was not checked or did not render before is Kustomize's, Helm's or render's
// words about the pull request's files, quoting a path or a value of them; read as
// Markdown they mentioned people and showed images in the check run.
func TestCheckRunSummaryShowsFailureReasonsOnlyAsCode(t *testing.T) {
	const path = "apps/@acme/admins ![x](https://tracker.example/p.png)/kustomization.yaml"
	const value = "`@acme/admins` [docs](https://phish.example)"
	r := report{repo: "acme/deploy", branch: "@acme/admins", deploying: 3, apps: []appResult{
		{name: "web", cluster: "prod", failed: "accumulating resources: " + path + ": no such file"},
		{name: "api", cluster: "prod", notChecked: "its source " + path + " is not read"},
		{name: "db", cluster: "prod", brokenBefore: "yaml: invalid value " + value, capabilities: "Helm's defaults: " + value},
	}}
	summary := r.summary()
	got := markdowntest.Parse(summary)
	if strings.Contains(got.Prose, "@acme") || len(got.Destinations) != 0 {
		t.Fatalf("failure reasons read as Markdown: %q, links %q\nsummary:\n%s", got.Prose, got.Destinations, summary)
	}
	for _, want := range []string{"no such file", "is not read", "did not render before this change"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
}

// TestBaseMoveNamesTheFilesItChangedOnlyAsCode: the files a push to the base
// changed are named by whoever pushed; read as Markdown in the run's summary their
// paths mentioned people and showed images.
func TestBaseMoveNamesTheFilesItChangedOnlyAsCode(t *testing.T) {
	const path = "apps/@acme/admins ![x](https://tracker.example/p.png)/kustomization.yaml"
	got := staleReport(github.CheckReport{Title: "t", Summary: "s\n"}, BaseMove{Branch: "main", SHA: "0123456789abcdef"}, store.PullCheck{BaseSHA: "fedcba9876543210"},
		pushReach{apps: map[string][]string{"argocd/web (cluster prod)": {path, path}}}, []string{"argocd/web (cluster prod)"})
	read := markdowntest.Parse(got.Summary)
	if strings.Contains(read.Prose, "@acme") || len(read.Destinations) != 0 || !strings.Contains(got.Summary, "kustomization.yaml") {
		t.Fatalf("a pushed file's path read as Markdown: %q, links %q\n%s", read.Prose, read.Destinations, got.Summary)
	}
}

// TestBaseMoveNamesItsBranchOnlyAsCode: a branch's name may hold "@team"; the notes
// of a moved or unjudged base and of a changed policy mentioned it as prose.
func TestBaseMoveNamesItsBranchOnlyAsCode(t *testing.T) {
	const branch = "@acme/admins"
	m := BaseMove{Branch: branch, SHA: "0123456789abcdef"}
	rec := store.PullCheck{BaseBranch: branch, BaseSHA: "fedcba9876543210"}
	for what, md := range map[string]string{
		"stale":    staleReport(github.CheckReport{Summary: "s\n"}, m, rec, pushReach{all: true}, []string{"argocd/web (cluster prod)"}).Summary,
		"owed":     owedNote(rec, nil),
		"policy":   stalePolicyReport(ResultPolicy{}, m, rec, policyMove{}).Summary,
		"summary":  (&report{repo: "acme/deploy", branch: branch}).summary(),
		"no rules": (&policy.Report{Repo: "acme/deploy", DefaultBranch: branch}).Summary(),
	} {
		if read := markdowntest.Parse(md); strings.Contains(read.Prose, "@acme") {
			t.Errorf("%s: the branch's name read as Markdown: %q\n%s", what, read.Prose, md)
		}
	}
}

// TestRunningSummariesNameBranchesOnlyAsCode: a pull request's base branch is
// named by whoever opened it, the default branch by the repository; written as
// prose in the runs' summaries while they run, "@acme/admins" mentioned the team.
func TestRunningSummariesNameBranchesOnlyAsCode(t *testing.T) {
	const hostile = "x@acme/admins"
	h := Head{Repo: "acme/deploy", HeadSHA: "0123456789012345678901234567890123456789", BaseBranch: hostile}
	for what, md := range map[string]string{"kukie/render": renderingSummary(h), "kukie/policy": policyStartSummary(h, hostile)} {
		if got := markdowntest.Parse(md); strings.Contains(got.Prose, "@acme") || !strings.Contains(md, hostile) {
			t.Errorf("%s: the branch read as Markdown: %q\n%s", what, got.Prose, md)
		}
	}
	h.BaseBranch = "main"
	if got, want := policyStartSummary(h, "main"), "Checking acme/deploy at 0123456 against the rules of `.kukie.yml` on main."; got != want {
		t.Errorf("policyStartSummary = %q, want %q", got, want)
	}
}
