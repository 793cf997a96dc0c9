package cmd

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestShortCommandsDoNotCollect runs the program as a process, as people run it,
// with the Go runtime tracing each collection: "version" and a plan on the
// 30-object overlay end without one (their heap stays under the start-up heap of
// internal/gcstart), where the default pacing collected several times while the
// packages were still initialising.
func TestShortCommandsDoNotCollect(t *testing.T) {
	repo, app := overlay30(t)
	for name, args := range map[string][]string{
		"version": {"version"},
		"plan":    {"plan", "--repo", repo, "--app", app, "--type", "Kustomize", "--namespace", "shop", "scale", "deploy/svc03", "--replicas", "5"},
	} {
		t.Run(name, func(t *testing.T) {
			c := exec.Command(os.Args[0], args...)
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GODEBUG=") {
					c.Env = append(c.Env, kv)
				}
			}
			c.Env = append(c.Env, runAsBinaryEnv+"=1", "GODEBUG=gctrace=1")
			var stderr bytes.Buffer
			c.Stderr = &stderr
			if err := c.Run(); err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			if gcs := regexp.MustCompile(`(?m)^gc \d+ @.*$`).FindAllString(stderr.String(), -1); len(gcs) > 0 {
				t.Fatalf("%s collected %d times:\n%s", name, len(gcs), strings.Join(gcs, "\n"))
			}
		})
	}
}
