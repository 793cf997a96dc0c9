package prcheck_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/prcheck"
)

// TestSymlinkOfAPullRequestIsCheckedAsALink: a pull request that adds a symbolic
// link to an app's folder (GitHub's comparison does not say a file is a link)
// deploys what the link points to; the check must render that, not a file
// holding the link's target as text, or an object the link brings in would pass
// unchecked.
func TestSymlinkOfAPullRequestIsCheckedAsALink(t *testing.T) {
	ctx := context.Background()
	s, inst, repos, url := fakeRepo(t, map[string]string{
		"apps/web/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  k: v\n",
		"shared/extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: linked-in\ndata:\n  k: v\n",
	})
	apps := applications{[]argocd.Application{{Name: "web", Namespace: "argocd", Spec: argocd.AppSpec{
		Source:      &argocd.AppSource{RepoURL: url, Path: "apps/web", TargetRevision: "main"},
		Destination: argocd.AppDestination{Server: argocd.InClusterServer, Namespace: "web"}}, Status: argocd.AppStatus{SourceType: "Directory"}}}}
	checker := &prcheck.Checker{GitHub: repos(), Connections: connections{}, Applications: apps}
	head := s.PushSymlinks(t, repo, "link", map[string]string{"apps/web/extra.yaml": "../../shared/extra.yaml"}, githubtest.DefaultAuthor)
	h := prcheck.Head{InstallationID: inst, Repo: repo, RepoURL: url, BaseBranch: "main", BaseSHA: s.Head(t, repo, "main"), HeadSHA: head, Key: "pull/1"}
	if err := checker.Check(ctx, h); err != nil {
		t.Fatal(err)
	}
	var run string
	for _, r := range s.CheckRuns(t, repo, head) {
		if r.GetName() == github.CheckRunName {
			run = r.GetConclusion() + "\n" + r.GetOutput().GetSummary() + "\n" + r.GetOutput().GetText()
		}
	}
	if !strings.Contains(run, "linked-in") {
		t.Fatalf("the check does not show the ConfigMap the link adds:\n%s", run)
	}
}
