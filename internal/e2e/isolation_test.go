package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/servicetest"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestAnotherTeamCanNeitherReadNorActOnAChange: a second team with a token of every
// scope, and a cluster of the same name reached with the same kubeconfig (so its
// Argo CD Application names the first team's repository), guesses the first team's
// change code, idempotency key and repository. Every route and tool answers as if
// they did not exist, and the change is untouched.
func TestAnotherTeamCanNeitherReadNorActOnAChange(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployWeb("main")
		var c change
		s.mustJSON("POST", "/api/v1/changes", s.scale(4, "chat-1"), http.StatusAccepted, &c)
		c = s.waitStatus(c.Code, "pr_open")

		ctx := context.Background()
		other, err := db.CreateTeam(ctx, "intruder")
		if err != nil {
			t.Fatal(err)
		}
		_, token, err := db.CreateAPIToken(ctx, other.ID, "intruder")
		if err != nil {
			t.Fatal(err)
		}
		as := func(method, path string, body any) (int, string) {
			t.Helper()
			status, out := servicetest.Do(t, s.http, method, path, token, body)
			return status, string(out)
		}
		if status, body := as("POST", "/api/v1/clusters", map[string]any{"name": s.cluster, "kubeconfig": string(s.kubeconfig)}); status != http.StatusCreated {
			t.Fatalf("the other team's own cluster: %d %s", status, body)
		}

		for _, req := range []struct{ method, path string }{
			{"GET", "/api/v1/changes/" + c.Code},
			{"POST", "/api/v1/changes/" + c.Code + "/cancel"},
			{"POST", "/api/v1/changes/" + c.Code + "/retry"},
			{"POST", "/api/v1/changes/" + c.Code + "/rollback"},
		} {
			if status, body := as(req.method, req.path, nil); status != http.StatusNotFound || strings.Contains(body, s.repo) {
				t.Errorf("%s %s by another team = %d %s, want 404 naming nothing of it", req.method, req.path, status, body)
			}
		}
		if status, body := as("GET", "/api/v1/changes", nil); status != http.StatusOK || strings.Contains(body, c.Code) {
			t.Errorf("the other team's change list = %d %s, want it without %s", status, body, c.Code)
		}
		if status, body := as("GET", "/api/v1/clusters/"+s.cluster+"/repository?"+url.Values{"repo": {s.repoURL}}.Encode(), nil); status == http.StatusOK {
			t.Errorf("the other team's repository view of %s = %d %s, want a refusal", s.repo, status, body)
		}
		if status, body := as("POST", "/api/v1/internal/tokens", map[string]any{"cluster": s.cluster, "repo": s.repoURL}); status != http.StatusForbidden || strings.Contains(body, "ghs_") {
			t.Errorf("a token for %s for the other team = %d %s, want 403", s.repo, status, body)
		}
		if status, body := as("POST", "/api/v1/clusters/"+s.cluster+"/repos", map[string]any{"repo": s.repoURL}); status != http.StatusForbidden {
			t.Errorf("the other team connecting %s = %d %s, want 403 repo_not_installed", s.repo, status, body)
		}
		// The same idempotency key is the other team's own, not a way to the change.
		if status, body := as("POST", "/api/v1/changes", s.scale(5, "chat-1")); strings.Contains(body, c.Code) {
			t.Errorf("the other team's request with the first team's idempotency key = %d %s, names the first team's change", status, body)
		}

		for tool, tc := range map[string]struct {
			args map[string]any
			want string // the refusal's code
		}{
			"get_change":      {map[string]any{"code": c.Code}, "not_found"},
			"cancel_change":   {map[string]any{"code": c.Code}, "not_found"},
			"rollback_change": {map[string]any{"code": c.Code}, "not_found"},
			"read_repo_file":  {map[string]any{"cluster": s.cluster, "namespace": s.appNS, "name": "web", "path": "apps/web/deployment.yaml"}, "repo_not_connected"},
			"list_repo_files": {map[string]any{"cluster": s.cluster, "namespace": s.appNS, "name": "web"}, "repo_not_connected"},
			"view_repository": {map[string]any{"cluster": s.cluster, "repo": s.repoURL}, "repo_not_connected"},
		} {
			text, isError := callTool(t, s.http.URL, token, tool, tc.args)
			if !isError || !strings.HasPrefix(text, tc.want+":") || strings.Contains(text, "replicas:") {
				t.Errorf("%s by the other team: error %v, %s; want the tool error %s", tool, isError, text, tc.want)
			}
		}

		if got := s.get(c.Code); got.Status != "pr_open" {
			t.Errorf("the change is %s after the other team's attempts, want pr_open", got.Status)
		}
		if prs := s.gh.PullRequests(t, s.repo); len(prs) != 1 || prs[0].GetState() != "open" {
			t.Errorf("pull requests after the other team's attempts: %d", len(prs))
		}
	})
}

// callTool calls an MCP tool over the streamable HTTP transport as a stateless
// client would, and returns the result's text and whether it is a tool error.
func callTool(t *testing.T, base string, token secret.Secret, name string, args map[string]any) (string, bool) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": name, "arguments": args}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token.Reveal())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out, &answer); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s (%v)", name, res.StatusCode, out, err)
	}
	if answer.Error != nil {
		return answer.Error.Message, true
	}
	var text strings.Builder
	for _, c := range answer.Result.Content {
		text.WriteString(c.Text)
	}
	return text.String(), answer.Result.IsError
}
