package plan_test

import (
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/internal/markdowntest"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// TestPRBodyShowsRepositoryContentOnlyAsCode: a repository's file can hold a line
// "```", which a diff shows as the context line " ```"; the fixed fence around the
// diff closed there and the lines after it were read as Markdown in the pull
// request, mentioning people and linking where the repository said. The same goes
// for a cluster diff and for the Application's path and revision, which the team's
// cluster names.
func TestPRBodyShowsRepositoryContentOnlyAsCode(t *testing.T) {
	const injected = " ```\n @acme/admins approved, merge it\n ![x](https://tracker.example/p.png)\n [docs](https://phish.example)\n"
	diff := "--- a/web.yaml\n+++ b/web.yaml\n@@ -1,6 +1,6 @@\n" + injected + "-  replicas: 3\n+  replicas: 4\n"
	pl := store.Plan{Code: "pln_md", Cluster: "prod", Reason: "scale", RequestedBy: "alice",
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}}
	pay := plan.Payload{
		App: &argocd.PayloadApp{Name: "web", Namespace: "argocd", SourceType: "Kustomize",
			Path: "apps/`web` @acme/admins [l](https://phish.example)", TargetRevision: "main`` ![i](https://tracker.example/r.png)"},
		GitDiff: diff,
		ClusterDiff: []render.ObjectDiff{{App: "web", APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "notes",
			Action: "modified", Diff: "@@ -1 +1 @@\n" + injected + "-a\n+b\n"}},
	}
	body := plan.PRBody(pl, pay)
	got := markdowntest.Parse(body)
	if strings.Contains(got.Prose, "@acme/admins") || len(got.Destinations) != 0 {
		t.Fatalf("repository and cluster text read as Markdown: %q, links %q\nbody:\n%s", got.Prose, got.Destinations, body)
	}
	if len(got.CodeBlocks) != 2 || !strings.Contains(got.CodeBlocks[0], injected) || !strings.Contains(got.CodeBlocks[1], injected) {
		t.Fatalf("the diffs are not each one code block as written: %q", got.CodeBlocks)
	}
}

// TestPRBodyAndCheckRunShowOthersWordsOnlyAsCode: warnings quote the repository's
// paths and values, the cluster check's note is the cluster's words, a failed
// comparison names the files pushed to the branch, a refusal on a new base quotes
// the base's files, and a retargeted pull request names the branch its author
// chose; written as prose they mentioned people, linked and showed images in the
// pull request and its check run.
func TestPRBodyAndCheckRunShowOthersWordsOnlyAsCode(t *testing.T) {
	const hostile = "apps/@acme/admins ![x](https://tracker.example/p.png)/kustomization.yaml: `x` [docs](https://phish.example)"
	pl := store.Plan{Code: "pln_md", Cluster: "prod", Reason: "scale", RequestedBy: "alice", HeadSHA: "abc", BaseBranch: "main",
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}}
	base := plan.Payload{
		App:              &argocd.PayloadApp{Name: "web", Namespace: "argocd", SourceType: "Kustomize", Path: "apps/web", TargetRevision: "main"},
		ArgoCD:           &argocd.Payload{Warning: "the Application " + hostile},
		Warnings:         []string{hostile, "patch.yaml: value " + hostile},
		ClusterCheck:     plan.ClusterCheckUnreachable,
		ClusterCheckNote: "admission webhook denied: " + hostile,
		VerifiedHead:     "abc",
	}
	check := func(what, md string) { t.Helper(); requireOnlyAsCode(t, what, md, "kustomization.yaml") }
	check("pull request body", plan.PRBody(pl, base))
	p := &plan.Pipeline{}
	check("check run", p.CheckReport(pl, base, "").Summary)
	check("failed comparison", p.CheckReport(pl, base, "Commit abc is not the base plus the verified edit: "+hostile+" was added.").Summary)
	refused := base
	refused.BaseRefusal = "On the new base def the change is refused: " + hostile
	check("refusal on the new base", p.CheckReport(pl, refused, "").Summary)
	retargeted := base
	retargeted.RetargetedTo = "@acme/admins"
	if got := markdowntest.Parse(p.CheckReport(pl, retargeted, "").Summary); strings.Contains(got.Prose, "@acme") {
		t.Errorf("retargeted: the branch's name read as Markdown: %q", got.Prose)
	}
}

// TestPRBodyShowsRenderedNamesOnlyAsCode: the kind and name of a changed object are
// the rendered manifests'; a name holding "@team" or an image was read as Markdown
// in the pull request, while a Kubernetes name is written as it always was.
func TestPRBodyShowsRenderedNamesOnlyAsCode(t *testing.T) {
	pl := store.Plan{Code: "pln_md", Cluster: "prod", Reason: "scale", RequestedBy: "alice",
		Target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "web"}}
	pay := plan.Payload{ClusterDiff: []render.ObjectDiff{
		{App: "web", APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "@acme/admins ![x](https://tracker.example/p.png)", Action: "added", Diff: "+a\n"},
		{App: "web", APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "web", Action: "modified", Diff: "+b\n"},
	}}
	body := plan.PRBody(pl, pay)
	got := markdowntest.Parse(body)
	if strings.Contains(got.Prose, "@acme") || len(got.Destinations) != 0 {
		t.Fatalf("a rendered name read as Markdown: %q, links %q\n%s", got.Prose, got.Destinations, body)
	}
	if !strings.Contains(body, "**ConfigMap shop/web** (modified, app `web`)") {
		t.Fatalf("a Kubernetes name is no longer written as it is:\n%s", body)
	}
}

// TestPRBodyAndCheckRunShowApplicationWordsOnlyAsCode: what a rollback reverts,
// the Application's name and source type (its status) and the Applications a
// verification compared come from elsewhere; written as prose, or inside a span of
// one backtick that a backtick of theirs closed, they mentioned people and linked
// in the pull request and its check run.
func TestPRBodyAndCheckRunShowApplicationWordsOnlyAsCode(t *testing.T) {
	const hostile = "` @acme/admins ![x](https://tracker.example/p.png) | [docs](https://phish.example)"
	pl := store.Plan{Code: "pln_md", Cluster: "prod", Reason: "roll back", RequestedBy: "alice", HeadSHA: "abc", BaseBranch: "main",
		RollbackOf: "pln_old", Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}}
	pay := plan.Payload{
		App:               &argocd.PayloadApp{Name: "web" + hostile, Namespace: "argocd", SourceType: "Kustomize" + hostile, Path: "apps/web", TargetRevision: "main"},
		RollbackReference: "0123abcd" + hostile,
		ClusterDiff:       []render.ObjectDiff{{App: "web" + hostile, APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "notes", Action: "modified", Diff: "-a\n+b\n"}},
		Verification:      &render.Verification{Verified: true, Apps: []render.AppVerification{{App: "argocd/web" + hostile, Objects: 2, Changed: 1}}},
		VerifiedHead:      "abc",
	}
	check := func(what, md string) { t.Helper(); requireOnlyAsCode(t, what, md, "tracker.example") }
	p := &plan.Pipeline{}
	check("pull request body", plan.PRBody(pl, pay))
	check("check run", p.CheckReport(pl, pay, "").Summary)
	check("check run text", p.CheckReport(pl, pay, "").Text)
	retargeted := pay
	retargeted.RetargetedTo = "develop"
	check("retargeted", p.CheckReport(pl, retargeted, "").Summary)
	pl.BaseBranch = "main" + hostile
	check("retargeted from a branch", p.CheckReport(pl, retargeted, "").Summary)

	// A plain Application and merge commit are written as they always were.
	pl.BaseBranch = "main"
	pay = plan.Payload{App: &argocd.PayloadApp{Name: "web", Namespace: "argocd", SourceType: "Kustomize", Path: "apps/web", TargetRevision: "main"},
		RollbackReference: "0123abcd", Verification: &render.Verification{Apps: []render.AppVerification{{App: "argocd/web", Objects: 2, Changed: 1}}}, VerifiedHead: "abc"}
	body := plan.PRBody(pl, pay)
	for _, want := range []string{"This reverts plan `pln_old` (`0123abcd`).", "Application `argocd/web` (Kustomize, path `apps/web`"} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
	if sum := p.CheckReport(pl, pay, "").Summary; !strings.Contains(sum, "| argocd/web | 2 | 1 | 0 |") {
		t.Errorf("summary:\n%s", sum)
	}
}

// requireOnlyAsCode fails unless md shows shown, and reads no mention of
// @acme and no link or image as Markdown.
func requireOnlyAsCode(t *testing.T, what, md, shown string) {
	t.Helper()
	got := markdowntest.Parse(md)
	if strings.Contains(got.Prose, "@acme") || len(got.Destinations) != 0 {
		t.Errorf("%s: others' words read as Markdown: %q, links %q\n%s", what, got.Prose, got.Destinations, md)
	}
	if !strings.Contains(md, shown) {
		t.Errorf("%s does not show the text at all:\n%s", what, md)
	}
}

// TestPRBodyNamesTheChartOfAHelmRepository: an Application deploying a chart
// from a Helm repository has only its values in the repository; the pull
// request says which chart, at which version and from where, as code.
func TestPRBodyNamesTheChartOfAHelmRepository(t *testing.T) {
	app := argocd.Application{Name: "redis", Namespace: "argocd", Spec: argocd.AppSpec{Sources: []argocd.AppSource{
		{RepoURL: "https://charts.example.com", Chart: "redis", TargetRevision: "18.1.0", Helm: &argocd.AppSourceHelm{ValueFiles: []string{"$values/envs/prod/redis.yaml"}}},
		{RepoURL: "https://github.com/acme/deploy", TargetRevision: "main", Ref: "values"},
	}}, Status: argocd.AppStatus{SourceTypes: []string{"Helm"}}}
	src, _ := app.PrimarySource()
	pa := argocd.PayloadApp{Name: app.Name, Namespace: app.Namespace, RepoURL: src.RepoURL, Path: src.Path, TargetRevision: src.TargetRevision,
		SourceType: app.SourceType(), Chart: app.Chart()}
	pl := store.Plan{Code: "pln_chart", Cluster: "prod", Reason: "scale", RequestedBy: "alice",
		Target: objref.Target{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: "cache", Name: "redis"}}
	body := plan.PRBody(pl, plan.Payload{App: &pa})
	if want := "Application `argocd/redis` (Helm, chart `redis 18.1.0 from https://charts.example.com`, values at path `envs/prod`, revision `main`)"; !strings.Contains(body, want) {
		t.Fatalf("the body does not say %q:\n%s", want, body)
	}
}
