package setup_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// Administering a team's clusters, connections, installations and repository
// tokens needs the admin scope; a read or change token is refused before the
// handler runs.
func TestAdminRoutesNeedTheAdminScope(t *testing.T) {
	db := storetest.SQLite(t)
	e := newEnv(t, db)
	ctx := context.Background()
	_, readChange, err := db.CreateAPIToken(ctx, e.teamA.ID, "chat", store.ScopeRead, store.ScopeChange)
	if err != nil {
		t.Fatal(err)
	}
	routes := []struct{ method, path string }{
		{"POST", "/api/v1/installations/state"},
		{"GET", "/api/v1/installations"},
		{"POST", "/api/v1/clusters"},
		{"GET", "/api/v1/clusters"},
		{"POST", "/api/v1/clusters/prod/repos"},
		{"GET", "/api/v1/clusters/prod/repos"},
		{"DELETE", "/api/v1/clusters/prod/repos"},
		{"GET", "/api/v1/clusters/prod/repos/suggestions"},
		{"POST", "/api/v1/internal/tokens"},
	}
	for _, r := range routes {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			status, body := e.do(r.method, r.path, readChange, map[string]any{})
			if status != http.StatusForbidden || !strings.Contains(string(body), `"insufficient_scope"`) || !strings.Contains(string(body), "the admin scope") {
				t.Fatalf("read,change token = %d %s, want 403 insufficient_scope naming admin", status, body)
			}
		})
	}
	if status, body := e.do("GET", "/api/v1/clusters", e.tokenA, nil); status != http.StatusOK {
		t.Fatalf("all-scope token = %d %s, want 200", status, body)
	}
}
