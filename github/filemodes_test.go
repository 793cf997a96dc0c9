package github_test

import (
	"context"
	"reflect"
	"testing"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
)

// TestFileModesTellLinksFromFiles reads the modes of a commit's files, folder by
// folder: a file, a symbolic link beside it, a file deeper down; paths the commit
// does not hold (a missing file, a path through a file) are left out.
func TestFileModesTellLinksFromFiles(t *testing.T) {
	s := githubtest.New(t)
	s.CreateRepo(t, "acme", "deploy", map[string]string{"apps/web/cm.yaml": "a: 1\n", "apps/web/base/d.yaml": "b: 1\n"}, "main")
	id := s.CreateInstallation(t, "acme", "deploy")
	sha := s.PushSymlinks(t, "acme/deploy", "main", map[string]string{"apps/web/link.yaml": "cm.yaml"}, githubtest.DefaultAuthor)
	c, err := gh.NewClient(s.Client()).WithAuthToken(s.InstallationToken(t, id, nil, nil).Reveal()).WithEnterpriseURLs(s.URL(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	modes, err := github.FileModes(context.Background(), c, "acme", "deploy", sha,
		[]string{"apps/web/cm.yaml", "apps/web/link.yaml", "apps/web/base/d.yaml", "apps/web/gone.yaml", "apps/web/cm.yaml/x"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"apps/web/cm.yaml": github.ModeFile, "apps/web/link.yaml": github.ModeSymlink, "apps/web/base/d.yaml": github.ModeFile}
	if !reflect.DeepEqual(modes, want) {
		t.Fatalf("modes %v, want %v", modes, want)
	}
}
