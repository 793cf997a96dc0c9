package githubtest

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-github/v62/github"
)

// gitOut runs the git CLI in a repository of the fake and returns trimmed stdout.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestGitDataCommitFlow(t *testing.T) {
	s := New(t)
	initial := map[string]string{
		"README.md":                   "# deploy\n",
		"apps/web/deployment.yaml":    "replicas: 1\n",
		"apps/web/old.yaml":           "gone soon\n",
		"apps/api/kustomization.yaml": "resources: []\n",
	}
	c, _ := installedRepo(t, s, initial)
	dir := s.GitDir(t, "acme/deploy")
	base := s.Head(t, "acme/deploy", "main")
	if got := gitOut(t, dir, "rev-parse", "refs/heads/main"); got != base {
		t.Fatalf("Head = %s, git rev-parse = %s", base, got)
	}

	utf8Blob, _, err := c.Git.CreateBlob(ctx, "acme", "deploy", &github.Blob{Content: ptr("replicas: 3\n"), Encoding: ptr("utf-8")})
	if err != nil {
		t.Fatalf("create utf-8 blob: %v", err)
	}
	contentFile := filepath.Join(t.TempDir(), "content")
	if err := os.WriteFile(contentFile, []byte("replicas: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if want := gitOut(t, dir, "hash-object", "--no-filters", contentFile); utf8Blob.GetSHA() != want {
		t.Errorf("blob sha = %s, git hash-object = %s", utf8Blob.GetSHA(), want)
	}
	b64Blob, _, err := c.Git.CreateBlob(ctx, "acme", "deploy", &github.Blob{Content: ptr("bmV3IGZpbGUK"), Encoding: ptr("base64")})
	if err != nil {
		t.Fatalf("create base64 blob: %v", err)
	}
	if got := gitOut(t, dir, "cat-file", "-p", b64Blob.GetSHA()); got != "new file" {
		t.Errorf("base64 blob content = %q, want %q", got, "new file")
	}

	baseCommit, _, err := c.Git.GetCommit(ctx, "acme", "deploy", base)
	if err != nil {
		t.Fatalf("get base commit: %v", err)
	}
	tree, _, err := c.Git.CreateTree(ctx, "acme", "deploy", baseCommit.GetTree().GetSHA(), []*github.TreeEntry{
		{Path: ptr("apps/web/deployment.yaml"), Mode: ptr("100644"), Type: ptr("blob"), SHA: utf8Blob.SHA},
		{Path: ptr("apps/web/new.yaml"), Mode: ptr("100644"), Type: ptr("blob"), SHA: b64Blob.SHA},
		{Path: ptr("apps/web/old.yaml"), Mode: ptr("100644"), Type: ptr("blob")}, // sha: null deletes
		{Path: ptr("hack/run.sh"), Mode: ptr("100755"), Type: ptr("blob"), Content: ptr("#!/bin/sh\n")},
	})
	if err != nil {
		t.Fatalf("create tree: %v", err)
	}
	commit, _, err := c.Git.CreateCommit(ctx, "acme", "deploy", &github.Commit{
		Message: ptr("Scale web to 3"),
		Tree:    &github.Tree{SHA: tree.SHA},
		Parents: []*github.Commit{{SHA: ptr(base)}},
	}, nil)
	if err != nil {
		t.Fatalf("create commit: %v", err)
	}
	if !commit.GetVerification().GetVerified() {
		t.Errorf("a commit the App makes without an author should be verified")
	}
	if got := gitOut(t, dir, "rev-parse", commit.GetSHA()+"^{tree}"); got != tree.GetSHA() {
		t.Errorf("commit tree per git = %s, API said %s", got, tree.GetSHA())
	}
	if got := gitOut(t, dir, "rev-parse", commit.GetSHA()+"^"); got != base {
		t.Errorf("commit parent per git = %s, want %s", got, base)
	}
	gitOut(t, dir, "fsck", "--strict", "--no-dangling")
	if got := gitOut(t, dir, "ls-tree", "-r", "--name-only", commit.GetSHA()); got != strings.Join([]string{
		"README.md", "apps/api/kustomization.yaml", "apps/web/deployment.yaml", "apps/web/new.yaml", "hack/run.sh",
	}, "\n") {
		t.Errorf("tree after edit:\n%s", got)
	}
	if mode := gitOut(t, dir, "ls-tree", commit.GetSHA(), "hack/run.sh"); !strings.HasPrefix(mode, "100755 blob") {
		t.Errorf("hack/run.sh = %q, want mode 100755", mode)
	}

	ref, _, err := c.Git.CreateRef(ctx, "acme", "deploy", &github.Reference{Ref: ptr("refs/heads/kukie/plan-1"), Object: &github.GitObject{SHA: commit.SHA}})
	if err != nil {
		t.Fatalf("create ref: %v", err)
	}
	if ref.GetObject().GetSHA() != commit.GetSHA() || ref.GetRef() != "refs/heads/kukie/plan-1" {
		t.Errorf("ref = %+v", ref)
	}
	_, _, err = c.Git.CreateRef(ctx, "acme", "deploy", &github.Reference{Ref: ptr("refs/heads/kukie/plan-1"), Object: &github.GitObject{SHA: commit.SHA}})
	if er := wantStatus(t, err, http.StatusUnprocessableEntity); er.Message != "Reference already exists" {
		t.Errorf("message = %q", er.Message)
	}
	got, _, err := c.Git.GetRef(ctx, "acme", "deploy", "heads/kukie/plan-1")
	if err != nil || got.GetObject().GetSHA() != commit.GetSHA() {
		t.Fatalf("get ref = %v, %v", got, err)
	}
	if content, ok := s.FileAt(t, "acme/deploy", "kukie/plan-1", "apps/web/deployment.yaml"); !ok || content != "replicas: 3\n" {
		t.Errorf("FileAt = %q, %v", content, ok)
	}
	if _, ok := s.FileAt(t, "acme/deploy", "kukie/plan-1", "apps/web/old.yaml"); ok {
		t.Errorf("deleted file still present")
	}

	// Moving the branch back to base is not a fast-forward.
	_, _, err = c.Git.UpdateRef(ctx, "acme", "deploy", &github.Reference{Ref: ptr("heads/kukie/plan-1"), Object: &github.GitObject{SHA: ptr(base)}}, false)
	if er := wantStatus(t, err, http.StatusUnprocessableEntity); er.Message != "Update is not a fast forward" {
		t.Errorf("message = %q", er.Message)
	}
	if _, _, err := c.Git.UpdateRef(ctx, "acme", "deploy", &github.Reference{Ref: ptr("heads/kukie/plan-1"), Object: &github.GitObject{SHA: ptr(base)}}, true); err != nil {
		t.Fatalf("forced update: %v", err)
	}
	if got := gitOut(t, dir, "rev-parse", "refs/heads/kukie/plan-1"); got != base {
		t.Errorf("after force update branch = %s, want %s", got, base)
	}
	if _, _, err := c.Git.UpdateRef(ctx, "acme", "deploy", &github.Reference{Ref: ptr("heads/kukie/plan-1"), Object: &github.GitObject{SHA: commit.SHA}}, false); err != nil {
		t.Fatalf("fast-forward update: %v", err)
	}
	_, _, err = c.Git.UpdateRef(ctx, "acme", "deploy", &github.Reference{Ref: ptr("heads/missing"), Object: &github.GitObject{SHA: commit.SHA}}, false)
	wantStatus(t, err, http.StatusUnprocessableEntity)
	if _, err := c.Git.DeleteRef(ctx, "acme", "deploy", "heads/kukie/plan-1"); err != nil {
		t.Fatalf("delete ref: %v", err)
	}
	_, _, err = c.Git.GetRef(ctx, "acme", "deploy", "heads/kukie/plan-1")
	wantStatus(t, err, http.StatusNotFound)
}

func TestGitDataValidation(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"a": "1"})
	head := s.Head(t, "acme/deploy", "main")
	tests := map[string]func() error{
		"ref to a missing object": func() error {
			_, _, err := c.Git.CreateRef(ctx, "acme", "deploy", &github.Reference{Ref: ptr("refs/heads/x"), Object: &github.GitObject{SHA: ptr(strings.Repeat("a", 40))}})
			return err
		},
		"unqualified ref name": func() error {
			_, _, err := c.Git.CreateRef(ctx, "acme", "deploy", &github.Reference{Ref: ptr("x"), Object: &github.GitObject{SHA: ptr(head)}})
			return err
		},
		"commit on a missing tree": func() error {
			_, _, err := c.Git.CreateCommit(ctx, "acme", "deploy", &github.Commit{Message: ptr("m"), Tree: &github.Tree{SHA: ptr(strings.Repeat("b", 40))}}, nil)
			return err
		},
		"commit with a missing parent": func() error {
			_, _, err := c.Git.CreateCommit(ctx, "acme", "deploy", &github.Commit{Message: ptr("m"), Tree: &github.Tree{SHA: ptr("4b825dc642cb6eb9a060e54bf8d69288fbee4904")}, Parents: []*github.Commit{{SHA: ptr(strings.Repeat("c", 40))}}}, nil)
			return err
		},
		"tree entry with a bad mode": func() error {
			_, _, err := c.Git.CreateTree(ctx, "acme", "deploy", "", []*github.TreeEntry{{Path: ptr("x"), Mode: ptr("100666"), Type: ptr("blob"), Content: ptr("x")}})
			return err
		},
		"tree entry with a malformed path": func() error {
			_, _, err := c.Git.CreateTree(ctx, "acme", "deploy", "", []*github.TreeEntry{{Path: ptr("a/../b"), Mode: ptr("100644"), Type: ptr("blob"), Content: ptr("x")}})
			return err
		},
		"tree entry pointing at a missing blob": func() error {
			_, _, err := c.Git.CreateTree(ctx, "acme", "deploy", "", []*github.TreeEntry{{Path: ptr("x"), Mode: ptr("100644"), Type: ptr("blob"), SHA: ptr(strings.Repeat("d", 40))}})
			return err
		},
	}
	for name, call := range tests {
		t.Run(name, func(t *testing.T) {
			wantStatus(t, call(), http.StatusUnprocessableEntity)
		})
	}
}

func TestCompareBranchesAndCommits(t *testing.T) {
	s := New(t)
	c, _ := installedRepo(t, s, map[string]string{"apps/web/a.yaml": "a: 1\n", "keep": "k\n"})
	base := s.Head(t, "acme/deploy", "main")
	s.CreateBranch(t, "acme/deploy", "feature", "main")
	s.CreateTag(t, "acme/deploy", "v1.0.0", "main")
	f1 := s.PushCommit(t, "acme/deploy", "feature", map[string]string{"apps/web/a.yaml": "a: 2\n", "apps/web/b.yaml": "b: 1\n"}, DefaultAuthor)
	f2 := s.DeleteFiles(t, "acme/deploy", "feature", DefaultAuthor, "keep")
	m1 := s.PushCommit(t, "acme/deploy", "main", map[string]string{"other": "o\n"}, DefaultAuthor)

	cmp, _, err := c.Repositories.CompareCommits(ctx, "acme", "deploy", "main", "feature", nil)
	if err != nil {
		t.Fatalf("compare: %v", err)
	}
	if cmp.GetStatus() != "diverged" || cmp.GetAheadBy() != 2 || cmp.GetBehindBy() != 1 {
		t.Errorf("compare = %s ahead %d behind %d, want diverged 2 1", cmp.GetStatus(), cmp.GetAheadBy(), cmp.GetBehindBy())
	}
	if cmp.GetMergeBaseCommit().GetSHA() != base {
		t.Errorf("merge base = %s, want %s", cmp.GetMergeBaseCommit().GetSHA(), base)
	}
	if len(cmp.Commits) != 2 || cmp.Commits[0].GetSHA() != f1 || cmp.Commits[1].GetSHA() != f2 {
		t.Errorf("commits = %v, want [%s %s]", cmp.Commits, f1, f2)
	}
	files := map[string]string{}
	for _, f := range cmp.Files {
		files[f.GetFilename()] = f.GetStatus()
	}
	want := map[string]string{"apps/web/a.yaml": "modified", "apps/web/b.yaml": "added", "keep": "removed"}
	for name, status := range want {
		if files[name] != status {
			t.Errorf("file %s = %q, want %q (all: %v)", name, files[name], status, files)
		}
	}
	if len(files) != len(want) {
		t.Errorf("files = %v, want %v", files, want)
	}

	ahead, _, err := c.Repositories.CompareCommits(ctx, "acme", "deploy", base, m1, nil)
	if err != nil || ahead.GetStatus() != "ahead" || ahead.GetAheadBy() != 1 {
		t.Errorf("compare base...main = %s %d, %v", ahead.GetStatus(), ahead.GetAheadBy(), err)
	}
	same, _, err := c.Repositories.CompareCommits(ctx, "acme", "deploy", m1, "main", nil)
	if err != nil || same.GetStatus() != "identical" {
		t.Errorf("compare main...main = %s, %v", same.GetStatus(), err)
	}

	br, _, err := c.Repositories.GetBranch(ctx, "acme", "deploy", "feature", 0)
	if err != nil || br.GetCommit().GetSHA() != f2 {
		t.Fatalf("get branch = %v, %v", br, err)
	}
	// go-github reports a missing branch only by status (it follows redirects itself).
	if _, resp, _ := c.Repositories.GetBranch(ctx, "acme", "deploy", "v1.0.0", 0); resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a tag asked as a branch should be 404, got %v", resp)
	}
	tag, _, err := c.Git.GetRef(ctx, "acme", "deploy", "tags/v1.0.0")
	if err != nil || tag.GetObject().GetSHA() != base {
		t.Errorf("tag ref = %v, %v", tag, err)
	}
	branches, _, err := c.Repositories.ListBranches(ctx, "acme", "deploy", nil)
	if err != nil || len(branches) != 2 {
		t.Fatalf("branches = %v, %v", branches, err)
	}

	rc, _, err := c.Repositories.GetCommit(ctx, "acme", "deploy", f1, nil)
	if err != nil {
		t.Fatalf("get commit: %v", err)
	}
	if rc.GetSHA() != f1 || len(rc.Parents) != 1 || rc.Parents[0].GetSHA() != base || len(rc.Files) != 2 {
		t.Errorf("commit %s parents %v files %d", rc.GetSHA(), rc.Parents, len(rc.Files))
	}
	if rc.GetCommit().GetAuthor().GetEmail() != DefaultAuthor.Email {
		t.Errorf("author = %v", rc.GetCommit().GetAuthor())
	}
	short, _, err := c.Repositories.GetCommit(ctx, "acme", "deploy", f1[:7], nil)
	if err != nil || short.GetSHA() != f1 {
		t.Errorf("short sha lookup = %v, %v", short.GetSHA(), err)
	}
	blob, _, err := c.Git.GetBlob(ctx, "acme", "deploy", rc.Files[0].GetSHA())
	if err != nil || blob.GetEncoding() != "base64" {
		t.Errorf("get blob = %v, %v", blob, err)
	}
	tree, _, err := c.Git.GetTree(ctx, "acme", "deploy", f2, true)
	if err != nil {
		t.Fatalf("get tree: %v", err)
	}
	var paths []string
	for _, e := range tree.Entries {
		paths = append(paths, e.GetPath())
	}
	if got := strings.Join(paths, ","); got != "apps,apps/web,apps/web/a.yaml,apps/web/b.yaml" {
		t.Errorf("recursive tree = %s", got)
	}
}
