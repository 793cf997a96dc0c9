package changes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestChangesAreListedInPages: GET /api/v1/changes answers at most limit changes
// (MaxChangesPage without one), newest first, with next when more follow; before=next
// answers the following page, so every change of the team is reached once, changes
// created in the same millisecond included, and another team's never. A limit out of
// range or a before the listing did not give is refused 400. Before, a team with more
// than 100 changes could not list its older ones.
func TestChangesAreListedInPages(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		srv, token := changesServer(t, db, stubPipeline{db})
		shop, err := db.TeamByName(ctx, "shop")
		if err != nil {
			t.Fatal(err)
		}
		other, err := db.CreateTeam(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		create := func(teamID, code string, createdAt int64) {
			t.Helper()
			if _, _, err := db.CreatePlan(ctx, store.Plan{Code: code, TeamID: teamID, Cluster: "prod", Status: "refused",
				Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
				Change: json.RawMessage(`{"replicas":{"count":2}}`)}, store.PlanEvent{Actor: "test"}); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, db.Rebind(`UPDATE plans SET created_at = ? WHERE code = ?`), createdAt, code); err != nil {
				t.Fatal(err)
			}
		}
		// More than a page, three at a time in one millisecond; newest first is
		// then by code, descending.
		const n = MaxChangesPage + 5
		var want []string
		for i := range n {
			code := fmt.Sprintf("p%03d", n-i)
			create(shop.ID, code, 1_700_000_000_000+int64(n-i)/3*1000)
			want = append(want, code)
		}
		create(other.ID, "theirs", 1_700_000_000_000+1)

		list := func(query string) (int, changeList, []byte) {
			t.Helper()
			status, body := callAs(srv, token, "GET", "/api/v1/changes"+query, "")
			var l changeList
			if status == http.StatusOK {
				if err := json.Unmarshal(body, &l); err != nil {
					t.Fatalf("%s: %v\n%s", query, err, body)
				}
			}
			return status, l, body
		}

		status, page, body := list("")
		if status != http.StatusOK || len(page.Changes) != MaxChangesPage || page.Next == "" {
			t.Fatalf("without a limit: %d, %d changes, next %q; want %d and a next\n%.300s", status, len(page.Changes), page.Next, MaxChangesPage, body)
		}
		var got []string
		for query := "?limit=7"; ; {
			status, page, body := list(query)
			if status != http.StatusOK || len(page.Changes) > 7 {
				t.Fatalf("%s: %d, %d changes\n%.300s", query, status, len(page.Changes), body)
			}
			for _, c := range page.Changes {
				got = append(got, c.Code)
			}
			if page.Next == "" {
				break
			}
			if len(got) > n {
				t.Fatalf("pages go on past the team's %d changes: %v", n, got)
			}
			query = "?limit=7&before=" + url.QueryEscape(page.Next)
		}
		if !slices.Equal(got, want) {
			t.Errorf("the pages list\n%v\nwant, newest first, each once\n%v", got, want)
		}

		for _, query := range []string{"?limit=0", "?limit=101", "?limit=ten", "?before=bm9wZQ", "?before=eC5wMDAx", "?before=*"} {
			status, body := callAs(srv, token, "GET", "/api/v1/changes"+query, "")
			if status != http.StatusBadRequest {
				t.Errorf("%s: %d, want 400\n%s", query, status, body)
				continue
			}
			wantCode(t, body, "invalid_request")
		}
	})
}

// TestChangesOfAClusterTheTeamHasNotAreNotFound: GET /api/v1/changes?cluster=
// naming a cluster the team has not registered, one whose name holds a letter of
// another script among them, answers 404 cluster_not_found saying so, as every
// route naming a cluster does; the team's own cluster lists its changes (failed
// before: 200 with no changes, which read as none made there).
func TestChangesOfAClusterTheTeamHasNotAreNotFound(t *testing.T) {
	db := storetest.SQLite(t)
	srv, token := changesServer(t, db, stubPipeline{db})
	for _, cluster := range []string{"staging", "pr\u043ed"} {
		status, body := callAs(srv, token, http.MethodGet, "/api/v1/changes?cluster="+url.QueryEscape(cluster), "")
		if status != http.StatusNotFound {
			t.Errorf("changes of cluster %q: %d %s, want 404", cluster, status, body)
		}
		wantCode(t, body, CodeClusterNotFound)
	}
	if status, body := callAs(srv, token, http.MethodGet, "/api/v1/changes?cluster=prod", ""); status != http.StatusOK {
		t.Errorf("changes of the team's cluster: %d %s, want 200", status, body)
	}
}
