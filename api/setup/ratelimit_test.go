package setup_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/api/setup"
	"github.com/kukie/kukie-gitops/ratelimit"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestCallOutRoutesAreLimitedPerTeam: the administrative routes that make the
// service call GitHub or the team's cluster share the team's AdminLimit; past it
// each is answered 429 rate_limited with Retry-After, the routes that only read the
// store still answer, and another team is not held back.
func TestCallOutRoutesAreLimitedPerTeam(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		// connected below connects one repository; then each route once. One a
		// minute after that burst: no refill within the test.
		limit, err := ratelimit.New("administrative calls for this team", 1, len(setup.CallOut)+1)
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, db, func(api *setup.API) { api.AdminLimit = limit })
		connected(t, e)
		kubeconfig := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
		bodies := map[string]any{
			"PUT /api/v1/clusters/{cluster}/kubeconfig":        map[string]string{"kubeconfig": kubeconfig},
			"POST /api/v1/clusters/{cluster}/repos":            map[string]string{"repo": "acme/infra"},
			"GET /api/v1/clusters/{cluster}/repos/suggestions": nil,
			"POST /api/v1/internal/tokens":                     map[string]string{"cluster": "prod", "repo": e.gh.URL() + "/acme/deploy.git"},
		}
		// call answers the status, the error code and Retry-After.
		call := func(pattern string, token secret.Secret) (int, string, string) {
			t.Helper()
			method, path, _ := strings.Cut(pattern, " ")
			var body []byte
			if b := bodies[pattern]; b != nil {
				if body, err = json.Marshal(b); err != nil {
					t.Fatal(err)
				}
			}
			req, err := http.NewRequest(method, e.http.URL+strings.ReplaceAll(path, "{cluster}", "prod"), bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token.Reveal())
			res, err := e.http.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var answer struct{ Error, Reason string }
			_ = json.NewDecoder(res.Body).Decode(&answer)
			res.Body.Close()
			return res.StatusCode, answer.Error, res.Header.Get("Retry-After")
		}
		for _, pattern := range setup.CallOut {
			if status, code, _ := call(pattern, e.tokenA); status == http.StatusTooManyRequests {
				t.Fatalf("%s within the team's burst: %d %s", pattern, status, code)
			}
		}
		for _, pattern := range setup.CallOut {
			status, code, retryAfter := call(pattern, e.tokenA)
			if status != http.StatusTooManyRequests || code != "rate_limited" {
				t.Errorf("%s past the team's limit: %d %s, want 429 rate_limited", pattern, status, code)
			}
			if retryAfter != "60" {
				t.Errorf("%s: Retry-After %q, want 60 (one a minute)", pattern, retryAfter)
			}
		}
		for _, path := range []string{"/api/v1/clusters", "/api/v1/clusters/prod/repos", "/api/v1/installations"} {
			if status, body := e.do("GET", path, e.tokenA, nil); status != http.StatusOK {
				t.Errorf("GET %s, which calls nothing out, past the limit: %d %s", path, status, body)
			}
		}
		for _, pattern := range setup.CallOut {
			if status, code, _ := call(pattern, e.tokenB); status == http.StatusTooManyRequests {
				t.Errorf("another team's %s: %d %s", pattern, status, code)
			}
		}
	})
}
