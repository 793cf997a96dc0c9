package changes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestChangeOrDecisionNamingAnUnknownClusterIsNotFound: a change or a decision
// naming a cluster the team does not have (none by that name, or another team's) is
// answered 404 cluster_not_found, and no plan is stored. A cluster the team has but
// that cannot be opened is refused with a reason that names it as the team knows it,
// without the service's internal id or its in-cluster configuration.
func TestChangeOrDecisionNamingAnUnknownClusterIsNotFound(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		doc := loadDoc(t)
		clusters := clusteraccess.Clusters{DB: db, Registry: kube.NewClusters(kube.Options{}), Credentials: &sealed.Box{}, InClusterTeams: []string{"shop"}}
		p := plan.New(plan.Deps{Store: db, Clusters: clusters}, plan.Config{})
		t.Cleanup(p.Close)
		srv, token := changesServer(t, db, p)
		shop, err := db.TeamByName(ctx, "shop")
		if err != nil {
			t.Fatal(err)
		}
		other, err := db.CreateTeam(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.CreateCluster(ctx, store.Cluster{TeamID: other.ID, Name: "staging", Access: store.ClusterInCluster}); err != nil {
			t.Fatal(err)
		}
		change := func(cluster string) string {
			return `{"cluster":"` + cluster + `","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},` +
				`"change":{"replicas":{"count":4}},"reason":"traffic","requested_by":"alice"}`
		}
		decide := func(cluster string) string {
			return `{"cluster":"` + cluster + `","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"}}`
		}

		for _, cluster := range []string{"nowhere", "staging"} {
			for route, body := range map[string]string{"/api/v1/changes": change(cluster), "/api/v1/decide": decide(cluster)} {
				t.Run(cluster+route, func(t *testing.T) {
					status, answer := callAs(srv, token, "POST", route, body)
					if status != http.StatusNotFound {
						t.Fatalf("POST %s naming cluster %s = %d, want 404: %s", route, cluster, status, answer)
					}
					wantCode(t, answer, CodeClusterNotFound)
					if !strings.Contains(string(answer), cluster) {
						t.Errorf("the reason does not name cluster %s: %s", cluster, answer)
					}
					resp, ok := doc.Paths[route]["post"].Responses[fmt.Sprint(status)]
					if !ok {
						t.Fatalf("404 of POST %s is not documented", route)
					}
					if err := doc.conforms(resp.Content["application/json"].Schema, answer); err != nil {
						t.Errorf("answer does not match the document: %v\n%s", err, answer)
					}
				})
			}
		}
		for _, cluster := range []string{"nowhere", "staging"} {
			for route, docPath := range map[string]string{
				"/api/v1/clusters/" + cluster + "/argocd/apps":            "/api/v1/clusters/{cluster}/argocd/apps",
				"/api/v1/clusters/" + cluster + "/argocd/apps/argocd/web": "/api/v1/clusters/{cluster}/argocd/apps/{namespace}/{name}",
			} {
				t.Run("GET "+route, func(t *testing.T) {
					status, answer := callAs(srv, token, "GET", route, "")
					if status != http.StatusNotFound {
						t.Fatalf("GET %s = %d, want 404: %s", route, status, answer)
					}
					wantCode(t, answer, CodeClusterNotFound)
					resp, ok := doc.Paths[docPath]["get"].Responses[fmt.Sprint(status)]
					if !ok {
						t.Fatalf("404 of GET %s is not documented", docPath)
					}
					if err := doc.conforms(resp.Content["application/json"].Schema, answer); err != nil {
						t.Errorf("answer does not match the document: %v\n%s", err, answer)
					}
				})
			}
		}
		plans, err := db.ListPlans(ctx, store.PlanFilter{TeamID: shop.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(plans) != 0 {
			t.Errorf("%d plans stored for clusters the team does not have, want none: %+v", len(plans), plans)
		}

		// The team's own cluster, which cannot be opened outside a pod.
		t.Setenv("KUBERNETES_SERVICE_HOST", "")
		t.Setenv("KUBERNETES_SERVICE_PORT", "")
		prod, err := db.ClusterByName(ctx, shop.ID, "prod")
		if err != nil {
			t.Fatal(err)
		}
		leaks := []string{prod.ID, "KUBERNETES_SERVICE", "/var/run/secrets"}
		status, answer := callAs(srv, token, "POST", "/api/v1/decide", decide("prod"))
		var d DecideResponse
		if status != http.StatusOK || json.Unmarshal(answer, &d) != nil || d.Known || !strings.Contains(d.Reason, "cluster prod") {
			t.Fatalf("decide on the team's unreadable cluster = %d %s, want 200 unknown naming cluster prod", status, answer)
		}
		status, answer = callAs(srv, token, "POST", "/api/v1/changes", change("prod"))
		if status != http.StatusUnprocessableEntity && status != http.StatusAccepted {
			t.Fatalf("change on the team's unreadable cluster = %d %s", status, answer)
		}
		for _, leak := range leaks {
			if strings.Contains(d.Reason, leak) || strings.Contains(string(answer), leak) {
				t.Errorf("an answer about the team's cluster carries %q:\ndecide: %s\nchange: %s", leak, d.Reason, answer)
			}
		}
	})
}

// TestClusterNotFoundShowsALookalikeName: a cluster name holding characters other
// than ASCII (a Cyrillic о in "prоd", a right-to-left override) is quoted in ASCII
// and said to hold them, so the refusal does not read "no cluster named "prod"" to
// a team that has prod (failed before: the name was shown as it is).
func TestClusterNotFoundShowsALookalikeName(t *testing.T) {
	for name, tc := range map[string]struct{ cluster, want string }{
		"a Cyrillic letter":        {"pr\u043ed", `no cluster named "pr\u043ed": a cluster name holds only lower-case ASCII letters`},
		"a right-to-left override": {"prod\u202e", `no cluster named "prod\u202e": a cluster name holds only`},
		"an ASCII name":            {"prod", `no cluster named "prod"; register it with POST /api/v1/clusters`},
	} {
		t.Run(name, func(t *testing.T) {
			if got := (&ClusterNotFoundError{Name: tc.cluster}).Error(); !strings.Contains(got, tc.want) {
				t.Fatalf("%q, want it to contain %q", got, tc.want)
			}
		})
	}
}

// appsAsking is an AppReader that counts what it is asked and, like the cluster
// client, fails a read of a name that is no path segment rather than finding
// nothing.
type appsAsking struct{ asked []string }

func (a *appsAsking) AppList(context.Context, clusteraccess.Ref) (argocd.AppList, error) {
	return argocd.AppList{}, nil
}

func (a *appsAsking) AppDetail(_ context.Context, _ clusteraccess.Ref, ns, name string) (argocd.AppDetail, error) {
	a.asked = append(a.asked, ns+"/"+name)
	if name == ".." || name == "." || strings.ContainsAny(name, "/%") || strings.ContainsAny(ns, "/%") {
		return argocd.AppDetail{}, fmt.Errorf("get application %s/%s: invalid resource name", ns, name)
	}
	return argocd.AppDetail{}, clusteraccess.ErrObjectNotFound
}

// TestAppNamesNoObjectCanHaveAreNotFound: an Application asked for by a namespace or
// name no Kubernetes object can have (one holding "%2F", "%25" or capitals) is
// answered 404 not_found saying so, without asking the cluster (failed before:
// asked, and "a/b", "a%b" answered 502 cluster_unavailable as the cluster's failure).
func TestAppNamesNoObjectCanHaveAreNotFound(t *testing.T) {
	db := storetest.SQLite(t)
	apps := &appsAsking{}
	token := teamWithCluster(t, db, "shop")
	srv, err := server.New(server.Config{}, server.Deps{Logger: zerolog.Nop(), Auth: db})
	if err != nil {
		t.Fatal(err)
	}
	(&API{Store: db, Apps: apps}).Mount(srv)
	for route, want := range map[string]string{
		"/api/v1/clusters/prod/argocd/apps/argocd/a%2Fb":     `application \"argocd\"/\"a/b\": no Application has a name holding \"/\": give namespace \"a\" and name \"b\" apart`,
		"/api/v1/clusters/prod/argocd/apps/argocd/a%25b":     `no Application has that name`,
		"/api/v1/clusters/prod/argocd/apps/Argo%2FCD/web":    `application \"Argo/CD\"/\"web\": no namespace has that name`,
		"/api/v1/clusters/prod/argocd/apps/argocd/Web":       `no Application has that name`,
		"/api/v1/clusters/prod/argocd/apps/argocd/web-1.api": `object not found`,
		// A Cyrillic "о" and a right-to-left override are shown escaped.
		"/api/v1/clusters/prod/argocd/apps/sh%D0%BEp/web":       `application \"sh\\u043ep\"/\"web\": no namespace has that name`,
		"/api/v1/clusters/prod/argocd/apps/argocd/w%E2%80%AEeb": `application \"argocd\"/\"w\\u202eeb\": no Application has that name`,
	} {
		t.Run(route, func(t *testing.T) {
			status, body := callAs(srv, token, "GET", route, "")
			if status != http.StatusNotFound {
				t.Fatalf("GET %s = %d %s, want 404", route, status, body)
			}
			wantCode(t, body, plan.CodeNotFound)
			if !strings.Contains(string(body), want) {
				t.Errorf("GET %s answered %s, want it to say %s", route, body, want)
			}
		})
	}
	if want := []string{"argocd/web-1.api"}; !slices.Equal(apps.asked, want) {
		t.Errorf("the cluster was asked for %q, want only %q", apps.asked, want)
	}
}
