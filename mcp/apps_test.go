package mcp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/kukie/kukie-gitops/api/changes"
	"github.com/kukie/kukie-gitops/mcp"
	"github.com/kukie/kukie-gitops/secret"
)

// getAPI asks the HTTP API beside the tools as token's team.
func (e *env) getAPI(t *testing.T, token secret.Secret, path string) (int, []byte) {
	t.Helper()
	return e.askAPI(t, token, http.MethodGet, path, nil)
}

// askAPI sends a request with body (none when nil) to the HTTP API beside the
// tools as token's team and returns the status and body of its answer.
func (e *env) askAPI(t *testing.T, token secret.Secret, method, path string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Transport: bearer{token}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, answer
}

// TestListAppsIsPagedAsTheAPIIs: list_apps answers a page of the cluster's apps at
// a time, as GET /api/v1/clusters/{cluster}/argocd/apps does: the default page
// without a limit, the next page from before=next, the same apps in the same
// order, cursors of either taken by the other, and a limit out of its bounds or a
// before no answer gave refused in the API's words (failed before: list_apps
// answered every app of the cluster in one result and took neither argument).
func TestListAppsIsPagedAsTheAPIIs(t *testing.T) {
	e := newEnv(t)
	for i := range 247 {
		e.cluster.apps = append(e.cluster.apps, application(fmt.Sprintf("app-%03d", i), connectedRepo, "main", deployedSHA, i%4 == 0))
	}
	const total = 250
	cs := e.connect(t, e.read)
	names := func(page map[string]any) []string {
		var out []string
		for _, a := range page["apps"].([]any) {
			m := a.(map[string]any)
			if m["ownership"] == "" {
				t.Fatalf("app without an ownership note: %v", m)
			}
			out = append(out, m["namespace"].(string)+"/"+m["name"].(string))
		}
		return out
	}
	apiPage := func(query string) ([]string, string) {
		t.Helper()
		status, body := e.getAPI(t, e.read, "/api/v1/clusters/prod/argocd/apps"+query)
		var p changes.AppListPage
		if status != http.StatusOK || json.Unmarshal(body, &p) != nil {
			t.Fatalf("GET apps%s = %d %.300s", query, status, body)
		}
		var out []string
		for _, a := range p.Apps {
			out = append(out, a.Namespace+"/"+a.Name)
		}
		return out, p.Next
	}

	first := mustOK(t, cs, mcp.ToolListApps, map[string]any{"cluster": "prod"})
	apiFirst, apiNext := apiPage("")
	if got := names(first); len(got) != changes.DefaultAppsPage || !slices.Equal(got, apiFirst) || first["next"] != apiNext || apiNext == "" {
		t.Fatalf("without a limit: %d apps, next %v; want the API's first page of %d and its next %q", len(got), first["next"], changes.DefaultAppsPage, apiNext)
	}
	if first["total"] != float64(total) {
		t.Errorf("total %v on a page, want the whole cluster's %d", first["total"], total)
	}
	all, _ := apiPage(fmt.Sprintf("?limit=%d", changes.MaxAppsPage))
	if whole := mustOK(t, cs, mcp.ToolListApps, map[string]any{"cluster": "prod", "limit": changes.MaxAppsPage}); !slices.Equal(names(whole), all) || whole["next"] != nil {
		t.Errorf("limit %d: %d apps, next %v; want all %d and no next", changes.MaxAppsPage, len(names(whole)), whole["next"], total)
	}

	var seen []string
	page := mustOK(t, cs, mcp.ToolListApps, map[string]any{"cluster": "prod", "limit": 40})
	seen = append(seen, names(page)...)
	for pages := 1; page["next"] != nil; pages++ {
		if pages > 10 {
			t.Fatal("the pages do not end")
		}
		next := page["next"].(string)
		// The API's page after the same cursor is the tool's.
		apiApps, _ := apiPage("?limit=40&before=" + url.QueryEscape(next))
		page = mustOK(t, cs, mcp.ToolListApps, map[string]any{"cluster": "prod", "limit": 40, "before": next})
		if !slices.Equal(names(page), apiApps) {
			t.Fatalf("page %d after %q: the tool answered %v, the API %v", pages+1, next, names(page), apiApps)
		}
		seen = append(seen, names(page)...)
	}
	if !slices.Equal(seen, all) {
		t.Errorf("pages of 40 answered %d apps, want the %d of the list in its order, none twice", len(seen), len(all))
	}
	// A cursor the API answered is the tool's before too.
	if again := mustOK(t, cs, mcp.ToolListApps, map[string]any{"cluster": "prod", "before": apiNext}); !slices.Equal(names(again), all[changes.DefaultAppsPage:2*changes.DefaultAppsPage]) {
		t.Errorf("the page after the API's next is not the second page")
	}

	limitWords := fmt.Sprintf("invalid_request: limit must be a whole number from 1 to %d", changes.MaxAppsPage)
	for _, limit := range []int{0, changes.MaxAppsPage + 1, -1} {
		mustRefuse(t, cs, mcp.ToolListApps, map[string]any{"cluster": "prod", "limit": limit}, limitWords)
		status, body := e.getAPI(t, e.read, fmt.Sprintf("/api/v1/clusters/prod/argocd/apps?limit=%d", limit))
		var refusal changes.ChangeError
		if status != http.StatusBadRequest || json.Unmarshal(body, &refusal) != nil || refusal.Error+": "+refusal.Reason != limitWords {
			t.Errorf("GET apps?limit=%d = %d %s; want 400 in the tool's words", limit, status, body)
		}
	}
	// Not whole, or past any int: refused in the same words, not the decoder's.
	for _, limit := range []float64{1.5, 1e30} {
		mustRefuse(t, cs, mcp.ToolListApps, map[string]any{"cluster": "prod", "limit": limit}, limitWords)
	}
	for _, before := range []string{"not base64!", "d2Vi"} {
		mustRefuse(t, cs, mcp.ToolListApps, map[string]any{"cluster": "prod", "before": before},
			"invalid_request: before must be the next of an earlier answer of this listing")
	}
}
