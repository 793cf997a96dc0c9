package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/internal/testtree"
)

// slowKustomizeRepo is an app kustomize takes a while to build: close to the
// document bound, where each new resource is checked against all before it.
func slowKustomizeRepo(t *testing.T) string {
	t.Helper()
	var docs strings.Builder
	for i := range 990 {
		fmt.Fprintf(&docs, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm%d\ndata:\n  k: v\n", i)
	}
	files := map[string]string{
		"app/kustomization.yaml": "resources:\n- many.yaml\n",
		"app/many.yaml":          docs.String(),
	}
	return testtree.Write(t, files)
}

// TestPlanCommandStopsOnFirstSIGTERM starts the real program planning a slow
// app and sends one SIGTERM once it has read its change (the manifest on stdin)
// and so is rendering: it must stop with a clear message, not finish the render.
func TestPlanCommandStopsOnFirstSIGTERM(t *testing.T) {
	repo := slowKustomizeRepo(t)
	cmd := exec.Command(os.Args[0], "plan", "--repo", repo, "--app", "app", "--type", "Kustomize", "--namespace", "web", "add", "-f", "-")
	cmd.Env = append(os.Environ(), runAsBinaryEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	// Signal handling is set up before the command reads its change, and the
	// render starts right after it has read all of it. The manifest is many times
	// a pipe's buffer, so the write returns only once the command is reading.
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata:\n  k: " + strings.Repeat("v", 1<<20) + "\n"
	if _, err := fmt.Fprint(stdin, manifest); err != nil {
		t.Fatal(err)
	}
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("exit: %v; want exit code 1\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("plan still running after SIGTERM\nstderr:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "kukie-gitops plan: interrupted; nothing written") {
		t.Fatalf("stderr does not say the plan was interrupted:\n%s", stderr.String())
	}
	if strings.Contains(stdout.String(), "Verdict") || strings.Contains(stderr.String(), "Refused") {
		t.Fatalf("the plan ran to a verdict after SIGTERM\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}
