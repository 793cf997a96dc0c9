package service

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/store"
)

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the README's text under heading, up to the next heading.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	start := strings.Index(doc, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("README has no heading %q", heading)
	}
	rest := doc[start+len(heading)+2:]
	if end := regexp.MustCompile(`(?m)^#+ `).FindStringIndex(rest); end != nil {
		return rest[:end[0]]
	}
	return rest
}

var backticked = regexp.MustCompile("`([^`]+)`")

// TestREADMEListsEveryRoute holds the README's route table (HTTP API) to Routes:
// every route the service serves has a row, and every row names a route.
func TestREADMEListsEveryRoute(t *testing.T) {
	documented := documentedRoutes(t, section(t, readme(t), "## HTTP API"))
	served := map[string]bool{}
	for _, r := range Routes {
		served[r.Pattern] = true
		if !documented[r.Pattern] {
			t.Errorf("README's HTTP API table has no row for %s", r.Pattern)
		}
	}
	for p := range documented {
		if !served[p] {
			t.Errorf("README's HTTP API table names %s, which the service does not serve", p)
		}
	}
}

// documentedRoutes reads the routes of a route table's first column. A cell may
// give a route its query (?repo=) and shorten the routes after its first to
// ".../{id}", which stands for the first one's path followed by /{id}.
func documentedRoutes(t *testing.T, table string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		first := ""
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			route, _, _ := strings.Cut(m[1], "?")
			method, path, hasMethod := strings.Cut(route, " ")
			if !hasMethod {
				method, path = "", route
			}
			if rest, short := strings.CutPrefix(path, "..."); short {
				if first == "" {
					t.Fatalf("README row %q shortens a route before naming one", line)
				}
				path = first + rest
			} else if first == "" {
				first = path
			}
			out[strings.TrimSpace(method+" "+path)] = true
		}
	}
	return out
}

// documentedCodes reads the README's error code table: each status with its codes.
func documentedCodes(t *testing.T) map[int][]string {
	t.Helper()
	out := map[int][]string{}
	row := regexp.MustCompile(`(?m)^\| (\d{3}) \| (.*) \|$`)
	for _, m := range row.FindAllStringSubmatch(section(t, readme(t), "### Error codes"), -1) {
		status, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range backticked.FindAllStringSubmatch(m[2], -1) {
			out[status] = append(out[status], c[1])
		}
	}
	if len(out) == 0 {
		t.Fatal("README's error code table has no rows")
	}
	return out
}

// TestREADMEErrorCodesAreTheAnswers calls every route as a client gets it wrong
// (no token, a malformed or unknown one, a token without the route's scope, an
// empty, malformed or incomplete body) and holds each error code answered to the
// README's error code table, under the status it came with.
func TestREADMEErrorCodesAreTheAnswers(t *testing.T) {
	svc, _, tokens := testService(t, []store.Scope{store.ScopeRead}, store.AllScopes)
	readOnly, full := tokens[0], tokens[1]
	documented := documentedCodes(t)
	answered := map[string]bool{}
	for _, r := range Routes {
		for _, c := range []struct{ auth, body string }{
			{"", "{}"},
			{"Basic dXNlcjpwYXNz", "{}"},
			{"Bearer kuk_unknown", "{}"},
			{"Bearer " + readOnly, "{}"},
			{"Bearer " + full, ""},
			{"Bearer " + full, "{"},
			{"Bearer " + full, "{}"},
			{"Bearer " + full, `{"unknown": 1}`},
		} {
			rec := callRoute(svc, r, c.auth, c.body)
			var answer struct{ Error string }
			if json.Unmarshal(rec.Body.Bytes(), &answer) != nil || answer.Error == "" {
				continue
			}
			answered[answer.Error] = true
			if !slices.Contains(documented[rec.Code], answer.Error) {
				t.Errorf("%s (%q, body %q) answers %d %s, which README's error code table does not list under %d",
					r.Pattern, c.auth, c.body, rec.Code, answer.Error, rec.Code)
			}
		}
	}
	if len(answered) < 5 {
		t.Fatalf("only %d error codes answered; the calls do not reach the handlers", len(answered))
	}
}

// TestOpenAPIDocumentIsTheRouteTable walks Routes and the OpenAPI document the
// service serves both ways: every operation the document describes is a route of
// the table, needing the scope the table says (none for a route anyone may call),
// and every /api/v1/ route is in the document.
func TestOpenAPIDocumentIsTheRouteTable(t *testing.T) {
	svc, _, _ := testService(t)
	rec := callRoute(svc, Route{Pattern: "GET /api/v1/openapi.json"}, "", "")
	var doc struct {
		Paths map[string]map[string]struct {
			Scope    string            `json:"x-required-scope"`
			Security []json.RawMessage `json:"security"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || len(doc.Paths) == 0 {
		t.Fatalf("GET /api/v1/openapi.json = %d, %v", rec.Code, err)
	}
	scopeOf := map[string]string{accessRead: "read", accessChange: "change", accessAdmin: "admin", accessAnyone: ""}
	routes := map[string]Route{}
	for _, r := range Routes {
		routes[r.Pattern] = r
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			pattern := strings.ToUpper(method) + " " + path
			documented[pattern] = true
			r, ok := routes[pattern]
			if !ok {
				t.Errorf("openapi.json documents %s, which the service does not serve", pattern)
				continue
			}
			if want := scopeOf[r.Access]; op.Scope != want || (want == "") != (op.Security != nil && len(op.Security) == 0) {
				t.Errorf("%s: openapi.json says scope %q (security %v), the route table %q", pattern, op.Scope, op.Security, r.Access)
			}
		}
	}
	for _, r := range Routes {
		_, path, _ := strings.Cut(r.Pattern, " ")
		if strings.HasPrefix(path, "/api/v1/") && !documented[r.Pattern] {
			t.Errorf("%s (%s) is not in openapi.json", r.Pattern, r.By)
		}
	}
}
