package cmd

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/plan"
)

// TestServeWithoutGitHubAppSaysWhyThePipelineIsUnavailable: a development start
// without a GitHub App logs once, at warn level, why the change pipeline does not run
// and what to configure, and the change API answers 503 pipeline_unavailable with
// that reason instead of accepting changes it cannot carry out.
func TestServeWithoutGitHubAppSaysWhyThePipelineIsUnavailable(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("KUKIE_AUTH_DEV_TEAM", "dev")
	t.Setenv("KUKIE_CLUSTERS_IN_CLUSTER_TEAMS", "dev")
	addr, logs, stop := serveInProcess(t)

	// The cluster exists, so the only reason left to refuse the change is the
	// missing pipeline (a cluster the team lacks is 404 cluster_not_found first).
	reg, err := http.Post("http://"+addr+"/api/v1/clusters", "application/json", strings.NewReader(`{"name":"prod","in_cluster":true}`))
	if err != nil {
		t.Fatal(err)
	}
	reg.Body.Close()
	if reg.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/v1/clusters = %d, want 201", reg.StatusCode)
	}

	body := `{"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},` +
		`"change":{"replicas":{"count":4}},"reason":"traffic","requested_by":"alice"}`
	resp, err := http.Post("http://"+addr+"/api/v1/changes", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var answer struct{ Error, Reason string }
	err = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || answer.Error != plan.CodePipelineUnavailable ||
		!strings.Contains(answer.Reason, "github.app_id") {
		t.Fatalf("POST /api/v1/changes = %d %+v (%v), want 503 %s naming github.app_id", resp.StatusCode, answer, err, plan.CodePipelineUnavailable)
	}

	line := logs.waitFor(t, "Change pipeline not available")
	if code := stop(); code != 0 {
		t.Fatalf("exit code %d\n%s", code, logs)
	}
	if reason, _ := line["reason"].(string); line["level"] != "warn" || !strings.Contains(reason, "github.app_id") || !strings.Contains(reason, "private_key") {
		t.Errorf("log line %v, want warn with a reason naming github.app_id and the private key", line)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	count := 0
	for _, m := range logs.lines {
		if msg, _ := m["message"].(string); strings.Contains(msg, "Change pipeline") {
			count++
		}
		// The access log line of the 503 itself is the server's to level.
		if m["level"] == "error" && m["message"] != "Request" {
			t.Errorf("error-level log line in a development start without an App: %v", m)
		}
	}
	if count != 1 {
		t.Errorf("%d log lines about the change pipeline, want 1:\n%s", count, logs.raw.String())
	}
}
