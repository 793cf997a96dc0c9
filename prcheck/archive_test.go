package prcheck_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/prcheck"
)

// TestArchiveOverItsLimitsConcludesTheCheck: a head whose repository archive is
// over the service's limits cannot be checked, and another try downloads the
// same archive: both runs conclude failure with the limit, and the check is not
// handed back to be tried again.
func TestArchiveOverItsLimitsConcludesTheCheck(t *testing.T) {
	ctx := context.Background()
	s, inst, repos, url := fakeRepo(t, map[string]string{"apps/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n"})
	gh := repos()
	archives, err := cache.NewArchives(t.TempDir(), 64<<20, cache.ArchiveLimits{MaxFileBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	gh.Archives = archives
	apps := applications{[]argocd.Application{{Name: "web", Namespace: "argocd", Spec: argocd.AppSpec{
		Source:      &argocd.AppSource{RepoURL: url, Path: "apps/web", TargetRevision: "main"},
		Destination: argocd.AppDestination{Server: argocd.InClusterServer, Namespace: "web"}}, Status: argocd.AppStatus{SourceType: "Directory"}}}}
	checker := &prcheck.Checker{GitHub: gh, Connections: connections{}, Applications: apps}
	head := s.PushCommit(t, repo, "more", map[string]string{"apps/web/other.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n"}, githubtest.DefaultAuthor)
	h := prcheck.Head{InstallationID: inst, Repo: repo, RepoURL: url, BaseBranch: "main", BaseSHA: s.Head(t, repo, "main"), HeadSHA: head, Key: "pull/1"}
	if err := checker.Check(ctx, h); err != nil {
		t.Fatalf("the check is handed back: %v", err)
	}
	runs := s.CheckRuns(t, repo, head)
	if len(runs) != 2 {
		t.Fatalf("%d runs, want kukie/render and kukie/policy", len(runs))
	}
	for _, r := range runs {
		if r.GetConclusion() != github.ConclusionFailure || !strings.Contains(r.GetOutput().GetSummary(), "repository archive over the limit: more than 2 entries") {
			t.Errorf("%s: %s: %s", r.GetName(), r.GetConclusion(), r.GetOutput().GetSummary())
		}
	}
}
