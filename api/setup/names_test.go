package setup_test

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestNamesFromTheCallerAreQuotedInASCII: a cluster name or setup parameter the
// caller sent is shown quoted in ASCII, so that a letter of another script ("prоd"
// with a Cyrillic о), a right-to-left override or an escape sequence is visible as
// its code rather than read as "prod" or rearranging the text (failed before: they
// were quoted with %q, which keeps printable non-ASCII characters as they are).
func TestNamesFromTheCallerAreQuotedInASCII(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t))
	if status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "prod", "in_cluster": true}); status != http.StatusCreated {
		t.Fatalf("register prod = %d %s", status, body)
	}
	names := map[string]string{
		"a Cyrillic letter":        "pr\u043ed",
		"a right-to-left override": "prod\u202e",
		"a zero-width space":       "pr\u200bod",
		"an escape sequence":       "prod\x1b[2J",
	}
	for what, name := range names {
		t.Run(what, func(t *testing.T) {
			quoted := strconv.QuoteToASCII(name)
			answers := map[string]func() (int, []byte){
				"a cluster's repositories": func() (int, []byte) {
					return e.do("GET", "/api/v1/clusters/"+url.PathEscape(name)+"/repos", e.tokenA, nil)
				},
				"a repository token": func() (int, []byte) {
					return e.do("POST", "/api/v1/internal/tokens", e.tokenA, map[string]any{"cluster": name, "repo": "acme/shop"})
				},
				"registering a cluster": func() (int, []byte) {
					return e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": name, "in_cluster": true})
				},
			}
			for route, ask := range answers {
				status, body := ask()
				var answer struct{ Error, Reason string }
				if err := json.Unmarshal(body, &answer); err != nil {
					t.Fatalf("%s: %d %s", route, status, body)
				}
				if !strings.Contains(answer.Reason, quoted) || strings.ContainsFunc(answer.Reason, notPrintableASCII) {
					t.Errorf("%s = %d %s %q, want the name quoted in ASCII, %s, and no other character", route, status, answer.Error, answer.Reason, quoted)
				}
			}
			if !strings.Contains(noClusterReason(t, e, name), "holds other characters") && name != "prod\x1b[2J" {
				t.Errorf("the refusal does not say that the name holds characters no cluster name has")
			}

			q := url.Values{"state": {e.state(e.tokenA)}, "setup_action": {"install"}, "installation_id": {name}}
			status, page := e.callback(q.Encode())
			if status != http.StatusBadRequest || !strings.Contains(page, html.EscapeString(quoted)) || strings.Contains(page, name) {
				t.Errorf("the callback's page for installation_id %s = %d, want 400 with the id quoted in ASCII\n%s", quoted, status, page)
			}
		})
	}
}

// noClusterReason is the reason of the repository listing of a cluster of that name.
func noClusterReason(t *testing.T, e *env, name string) string {
	t.Helper()
	_, body := e.do("GET", "/api/v1/clusters/"+url.PathEscape(name)+"/repos", e.tokenA, nil)
	var answer struct{ Reason string }
	if err := json.Unmarshal(body, &answer); err != nil {
		t.Fatal(err)
	}
	return answer.Reason
}

func notPrintableASCII(r rune) bool {
	return r > unicode.MaxASCII || (!unicode.IsPrint(r) && r != '\n' && r != '\t')
}
