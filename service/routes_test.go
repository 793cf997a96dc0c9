package service

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestRoutesAreWhatTheServiceServes holds the route table to the service New builds:
// the server mounts exactly the listed patterns, and each route enforces the access
// the table names (no token: 401 on token routes only; a read-only token: 403
// insufficient_scope on change and admin routes only).
func TestRoutesAreWhatTheServiceServes(t *testing.T) {
	ctx := context.Background()
	db := storetest.SQLite(t)
	cfg := config.Default()
	cfg.Pipeline.CacheDir = t.TempDir()
	svc, err := New(ctx, cfg, db, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range Routes {
		listed = append(listed, r.Pattern)
	}
	mounted := svc.server.Patterns()
	slices.Sort(listed)
	slices.Sort(mounted)
	if !slices.Equal(listed, mounted) {
		t.Fatalf("Routes lists\n  %s\nthe server mounts\n  %s", strings.Join(listed, "\n  "), strings.Join(mounted, "\n  "))
	}

	team, err := db.CreateTeam(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	_, readOnly, err := db.CreateAPIToken(ctx, team.ID, "reader", store.ScopeRead)
	if err != nil {
		t.Fatal(err)
	}
	h := svc.Handler()
	call := func(r Route, token string) (int, string) {
		method, path, ok := strings.Cut(r.Pattern, " ")
		if !ok {
			method, path = http.MethodPost, r.Pattern
		}
		path = strings.NewReplacer("{cluster}", "prod", "{code}", "k1", "{namespace}", "shop", "{name}", "web", "{id}", "e1").Replace(path)
		req := httptest.NewRequest(method, path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var answer struct{ Error string }
		_ = json.Unmarshal(rec.Body.Bytes(), &answer)
		return rec.Code, answer.Error
	}
	for _, r := range Routes {
		t.Run(r.Pattern, func(t *testing.T) {
			status, code := call(r, "")
			if status == http.StatusNotFound && code == "not_found" {
				t.Fatalf("no route answers %s", r.Pattern)
			}
			needsToken := strings.HasPrefix(r.Access, "token")
			if (status == http.StatusUnauthorized) != needsToken {
				t.Fatalf("without a token: %d %s; the table says access is %q", status, code, r.Access)
			}
			if !needsToken {
				return
			}
			status, code = call(r, readOnly.Reveal())
			refused := status == http.StatusForbidden && code == "insufficient_scope"
			if want := r.Access != accessRead; refused != want || status == http.StatusUnauthorized {
				t.Fatalf("with a read-only token: %d %s; the table says access is %q", status, code, r.Access)
			}
		})
	}
}
