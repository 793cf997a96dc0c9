package changes

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// manyApps is a cluster's Applications that a test may change between two reads.
type manyApps struct {
	mu   sync.Mutex
	apps []argocd.Application
}

func (m *manyApps) AppList(context.Context, clusteraccess.Ref) (argocd.AppList, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return argocd.SummarizeApps(slices.Clone(m.apps)), nil
}

func (m *manyApps) AppDetail(context.Context, clusteraccess.Ref, string, string) (argocd.AppDetail, error) {
	return argocd.AppDetail{}, clusteraccess.ErrObjectNotFound
}

func (m *manyApps) add(a argocd.Application) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.apps = append(m.apps, a)
}

// appOfSeverity is an Application named name in ns with problems of severity
// 0 (none) to 3 (a failed sync).
func appOfSeverity(ns, name string, severity int) argocd.Application {
	a := argocd.Application{Name: name, Namespace: ns, Spec: argocd.AppSpec{
		Source: &argocd.AppSource{RepoURL: "https://github.com/acme/deploy", Path: "apps/" + name, TargetRevision: "main"}},
		Status: argocd.AppStatus{Sync: argocd.AppSyncStatus{Status: argocd.SyncSynced}, Health: argocd.AppHealth{Status: "Healthy"}}}
	switch severity {
	case 3:
		a.Status.OperationState = &argocd.AppOperationState{Phase: argocd.PhaseFailed, Message: "one or more objects failed to apply"}
	case 2:
		a.Status.Health.Status = argocd.HealthDegraded
	case 1:
		a.Status.Sync.Status = argocd.SyncOutOfSync
	}
	return a
}

// TestAppListIsPaged: GET /api/v1/clusters/{cluster}/argocd/apps answers a page
// of the cluster's Applications at a time, as GET /api/v1/changes does (limit,
// before=next): DefaultAppsPage without a limit, in the order of the whole list
// (problem apps first), each page with the whole cluster's counts. A page goes on
// after the last Application of the one before, so one added meanwhile before
// it repeats nothing; a limit out of bounds or a before this listing did not give
// is refused 400 invalid_request saying so.
func TestAppListIsPaged(t *testing.T) {
	db := storetest.SQLite(t)
	token := teamWithCluster(t, db, "shop")
	srv, err := server.New(server.Config{}, server.Deps{Logger: zerolog.Nop(), Auth: db})
	if err != nil {
		t.Fatal(err)
	}
	cluster := &manyApps{}
	for i := range 250 {
		severity := 0
		switch {
		case i%7 == 0:
			severity = 3
		case i%5 == 0:
			severity = 2
		case i%3 == 0:
			severity = 1
		}
		cluster.add(appOfSeverity(fmt.Sprintf("team-%d", i%3), fmt.Sprintf("app-%03d", i), severity))
	}
	(&API{Store: db, Apps: cluster}).Mount(srv)
	want := []string{}
	full, _ := cluster.AppList(context.Background(), clusteraccess.Ref{})
	for _, a := range full.Apps {
		want = append(want, a.Namespace+"/"+a.Name)
	}

	type page struct {
		Total int                  `json:"total"`
		Apps  []argocd.AppListItem `json:"apps"`
		Next  string               `json:"next"`
	}
	get := func(query string) page {
		t.Helper()
		status, body := callAs(srv, token, http.MethodGet, "/api/v1/clusters/prod/argocd/apps"+query, "")
		var p page
		if status != http.StatusOK || json.Unmarshal(body, &p) != nil {
			t.Fatalf("GET apps%s = %d %.300s", query, status, body)
		}
		if p.Total != 250 && p.Total != 251 {
			t.Errorf("GET apps%s: total %d, want the whole cluster's count on every page", query, p.Total)
		}
		return p
	}
	names := func(items []argocd.AppListItem) []string {
		out := []string{}
		for _, a := range items {
			out = append(out, a.Namespace+"/"+a.Name)
		}
		return out
	}

	first := get("")
	if len(first.Apps) != DefaultAppsPage || first.Next == "" || !slices.Equal(names(first.Apps), want[:DefaultAppsPage]) {
		t.Fatalf("without a limit: %d apps, next %q, want the first %d of the list with a next", len(first.Apps), first.Next, DefaultAppsPage)
	}
	if len(get(fmt.Sprintf("?limit=%d", MaxAppsPage)).Apps) != 250 {
		t.Errorf("limit=%d did not answer every app", MaxAppsPage)
	}

	var seen []string
	p := get("?limit=40")
	seen = append(seen, names(p.Apps)...)
	// Added before the end of the first page (a failed sync, in the first
	// namespace): it moves nothing the next pages answer.
	cluster.add(appOfSeverity("team-0", "aaa-new", 3))
	pages := 1
	for p.Next != "" {
		p = get("?limit=40&before=" + p.Next)
		seen = append(seen, names(p.Apps)...)
		if pages++; pages > 20 {
			t.Fatal("the pages do not end")
		}
	}
	if pages != 7 || !slices.Equal(seen, want) {
		t.Errorf("%d pages of 40 answered %d apps, want 7 pages of the %d in the list's order, none twice (first differences: %v)",
			pages, len(seen), len(want), firstDifference(seen, want))
	}

	for _, query := range []string{"?limit=0", fmt.Sprintf("?limit=%d", MaxAppsPage+1), "?limit=ten", "?limit=-1"} {
		status, body := callAs(srv, token, http.MethodGet, "/api/v1/clusters/prod/argocd/apps"+query, "")
		if status != http.StatusBadRequest || !strings.Contains(string(body), fmt.Sprintf("limit must be a whole number from 1 to %d", MaxAppsPage)) {
			t.Errorf("GET apps%s = %d %s, want 400 naming the bounds", query, status, body)
		}
		wantCode(t, body, "invalid_request")
	}
	for _, before := range []string{"not base64!", base64.RawURLEncoding.EncodeToString([]byte("web")),
		base64.RawURLEncoding.EncodeToString([]byte("x/team-0/web")), base64.RawURLEncoding.EncodeToString([]byte("1/team-0/"))} {
		status, body := callAs(srv, token, http.MethodGet, "/api/v1/clusters/prod/argocd/apps?before="+url.QueryEscape(before), "")
		if status != http.StatusBadRequest || !strings.Contains(string(body), "before must be the next of an earlier answer") {
			t.Errorf("GET apps?before=%s = %d %s, want 400 saying what before must be", before, status, body)
		}
	}
}

func firstDifference(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d: %s, want %s", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(got), len(want))
}
