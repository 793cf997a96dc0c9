package service

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/store"
)

// TestEveryBodyIsBoundedThroughTheService: every route of the service that reads a
// request body refuses one over server.max_body_bytes 413 with a reason naming the
// limit (body_too_large; the tool server's a JSON-RPC error), as New wires them;
// every other route that a body can be sent to is listed as not reading it, so a new
// route must be placed in one list or the other.
func TestEveryBodyIsBoundedThroughTheService(t *testing.T) {
	cfg := config.Default()
	cfg.Server.MaxBodyBytes = 4096
	svc, db, tokens := testServiceWith(t, cfg, store.AllScopes)
	team, err := db.TeamByName(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCluster(context.Background(), store.Cluster{TeamID: team.ID, Name: "prod", Access: store.ClusterInCluster}); err != nil {
		t.Fatal(err)
	}
	// The change the change routes name: their body is read only for a change of
	// the caller's team.
	if _, _, err := db.CreatePlan(context.Background(), store.Plan{Code: "k1", TeamID: team.ID, Status: "pr_open", Change: json.RawMessage(`{}`)}, store.PlanEvent{Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	reads := map[string]bool{
		"POST /api/v1/clusters": true, "PUT /api/v1/clusters/{cluster}/kubeconfig": true, "POST /api/v1/clusters/{cluster}/repos": true,
		"POST /api/v1/internal/tokens": true, "POST /api/v1/changes": true, "POST /api/v1/changes/{code}/rollback": true,
		"POST /api/v1/changes/{code}/cancel": true, "POST /api/v1/decide": true, "POST /api/v1/notifications/endpoints": true, "/mcp": true,
	}
	ignores := map[string]string{
		// Bounded by its own limit, GitHub's 25 MB, and read only with a signature
		// in GitHub's form (api/webhook's TestWebhookOverGitHubsLimitIsRefused).
		"POST /webhooks/github":                            "GitHub's limit",
		"POST /api/v1/installations/state":                 "no body",
		"DELETE /api/v1/clusters/{cluster}/repos":          "the repository in the query",
		"POST /api/v1/changes/{code}/retry":                "no body",
		"DELETE /api/v1/notifications/endpoints/{id}":      "no body",
		"POST /api/v1/notifications/endpoints/{id}/resume": "no body",
		"POST /auth/signout":                               "no body",
	}
	oversized := `{"reason":"` + strings.Repeat("x", 2*int(cfg.Server.MaxBodyBytes)) + `"}`
	for _, r := range Routes {
		method, _, ok := strings.Cut(r.Pattern, " ")
		if ok && method != http.MethodPost && method != http.MethodPut && method != http.MethodDelete {
			continue
		}
		if _, ok := ignores[r.Pattern]; ok {
			continue
		}
		t.Run(r.Pattern, func(t *testing.T) {
			if !reads[r.Pattern] {
				t.Fatalf("a body can be sent to %s: list it as reading one or not", r.Pattern)
			}
			rec := callRoute(svc, r, "Bearer "+tokens[0], oversized)
			var answer struct {
				Error  json.RawMessage
				Reason string
			}
			if rec.Code != http.StatusRequestEntityTooLarge || json.Unmarshal(rec.Body.Bytes(), &answer) != nil {
				t.Fatalf("a body of %d bytes: %d %.300s, want 413 in JSON", len(oversized), rec.Code, rec.Body)
			}
			limit := fmt.Sprint(cfg.Server.MaxBodyBytes)
			if r.Pattern == "/mcp" {
				var rpc struct{ Error struct{ Message string } }
				if json.Unmarshal(answer.Error, &rpc.Error) != nil || !strings.Contains(rpc.Error.Message, limit) {
					t.Errorf("%s, want a JSON-RPC error naming the limit %s", rec.Body, limit)
				}
				return
			}
			if string(answer.Error) != `"body_too_large"` || !strings.Contains(answer.Reason, limit) {
				t.Errorf("%s, want body_too_large with a reason naming the limit %s", rec.Body, limit)
			}
		})
	}
}
