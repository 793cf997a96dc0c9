package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestScriptsAreExecutableInGit: make and CI run the project's scripts as commands,
// and a fresh clone takes file modes from git's index; lint checks them with
// hack/script-modes.sh. The project passes that check, and the check refuses a
// script committed without the executable bit.
func TestScriptsAreExecutableInGit(t *testing.T) {
	if out, err := exec.Command("hack/script-modes.sh").CombinedOutput(); err != nil {
		t.Errorf("the project's scripts are not all executable in git: %v\n%s", err, out)
	}

	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	for name, content := range map[string]string{
		"hack/run.sh":         "#!/usr/bin/env bash\necho run\n",
		".ci/run":             "#!/usr/bin/env bash\nmake test\n",
		"hack/notes.md":       "not a script\n",
		"testdata/fixture.sh": "#!/bin/sh\n",
	} {
		path := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("add", ".")
	check := func() (string, error) {
		out, err := exec.Command("hack/script-modes.sh", repo).CombinedOutput()
		return string(out), err
	}
	out, err := check()
	if err == nil || !strings.Contains(out, "hack/run.sh") || !strings.Contains(out, ".ci/run") {
		t.Errorf("scripts without +x passed the check (%v):\n%s", err, out)
	}
	if strings.Contains(out, "notes.md") || strings.Contains(out, "testdata") {
		t.Errorf("the check named a file that is not a script, or a test fixture:\n%s", out)
	}
	git("update-index", "--chmod=+x", "hack/run.sh", ".ci/run")
	if out, err := check(); err != nil {
		t.Errorf("executable scripts failed the check: %v\n%s", err, out)
	}
}
