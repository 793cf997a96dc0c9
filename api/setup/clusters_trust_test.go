package setup_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/api/setup"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// hostileKubeconfigs are kubeconfigs that would make the service run a command
// (the exec plugin creates marker) or read one of its own files (ownFile), each
// with the setting its refusal must name. server is the team's API server.
func hostileKubeconfigs(t *testing.T, server, marker, ownFile string) map[string]struct{ doc, field string } {
	t.Helper()
	credential := filepath.Join(t.TempDir(), "credential.json")
	if err := os.WriteFile(credential, []byte(`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-plugin"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := func(cluster, user string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
    server: %s
    certificate-authority-data: Y2EtZGF0YQ==
%s
contexts:
- name: prod
  context: {cluster: prod, user: admin}
current-context: prod
users:
- name: admin
  user:
%s
`, server, cluster, user)
	}
	return map[string]struct{ doc, field string }{
		"exec": {doc: doc("", fmt.Sprintf("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n"+
			"      command: /bin/sh\n      args: [\"-c\", \"touch %s && cat %s\"]", marker, credential)), field: "users[admin].exec"},
		"auth-provider": {doc: doc("", "    auth-provider:\n      name: oidc\n      config: {idp-issuer-url: https://idp.example}"),
			field: "users[admin].auth-provider"},
		"tokenFile":             {doc: doc("", "    tokenFile: "+ownFile), field: "users[admin].tokenFile"},
		"client-certificate":    {doc: doc("", "    client-certificate: "+ownFile), field: "users[admin].client-certificate"},
		"client-key":            {doc: doc("", "    client-key: "+ownFile), field: "users[admin].client-key"},
		"certificate-authority": {doc: doc("    certificate-authority: "+ownFile, "    token: t"), field: "clusters[prod].certificate-authority"},
	}
}

// TestRegisterClusterRefusesKubeconfigsThatRunOrRead: a kubeconfig whose credentials
// come from a command or a file is refused at registration with the setting named,
// and nothing is run or stored.
func TestRegisterClusterRefusesKubeconfigsThatRunOrRead(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		dir := t.TempDir()
		marker, ownFile := filepath.Join(dir, "plugin-ran"), filepath.Join(dir, "encryption.key")
		if err := os.WriteFile(ownFile, []byte("service-own-secret"), 0o600); err != nil {
			t.Fatal(err)
		}
		for name, tc := range hostileKubeconfigs(t, "https://prod.example:6443", marker, ownFile) {
			t.Run(name, func(t *testing.T) {
				clusterName := strings.ToLower(name)
				status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": clusterName, "kubeconfig": tc.doc})
				if status != http.StatusBadRequest || !strings.Contains(string(body), `"invalid_kubeconfig"`) || !strings.Contains(string(body), tc.field) {
					t.Errorf("register with %s = %d %s, want 400 invalid_kubeconfig naming %s", name, status, body, tc.field)
				}
				if _, err := db.ClusterByName(context.Background(), e.teamA.ID, clusterName); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("the cluster was stored (%v)", err)
				}
			})
		}
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the exec plugin ran at registration (marker file: %v)", err)
		}
	})
}

// TestStoredClusterRefusedAtUse: rows stored before registration refused these
// kubeconfigs, or before the operator narrowed in-cluster access, are refused when
// a cluster read uses them: the plugin never runs, the service's file is never sent,
// and the answer names why without the cluster's internal id.
func TestStoredClusterRefusedAtUse(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		var sent []string
		team := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sent = append(sent, r.Header.Get("Authorization"))
			http.Error(w, "forbidden", http.StatusForbidden)
		}))
		t.Cleanup(team.Close)
		e.api.AppRepos = setup.ApplicationRepos{Clusters: clusteraccess.Clusters{DB: db, Registry: kube.NewClusters(kube.Options{}),
			Credentials: e.api.Credentials, InClusterTeams: e.api.InClusterTeams}}

		dir := t.TempDir()
		marker, ownFile := filepath.Join(dir, "plugin-ran"), filepath.Join(dir, "encryption.key")
		if err := os.WriteFile(ownFile, []byte("service-own-secret"), 0o600); err != nil {
			t.Fatal(err)
		}
		i := 0
		for name, tc := range hostileKubeconfigs(t, team.URL, marker, ownFile) {
			i++
			clusterName := fmt.Sprintf("old-%d", i)
			sealedDoc, err := e.api.Credentials.Seal([]byte(tc.doc), store.CredentialsAssociatedData(e.teamA.ID, clusterName))
			if err != nil {
				t.Fatal(err)
			}
			c, err := db.CreateCluster(ctx, store.Cluster{TeamID: e.teamA.ID, Name: clusterName, Access: store.ClusterKubeconfig, SealedCredentials: sealedDoc})
			if err != nil {
				t.Fatal(err)
			}
			t.Run(name, func(t *testing.T) {
				status, body := e.do("GET", "/api/v1/clusters/"+clusterName+"/repos/suggestions", e.tokenA, nil)
				if status != http.StatusBadGateway || !strings.Contains(string(body), tc.field) || strings.Contains(string(body), c.ID) {
					t.Errorf("suggestions of a stored kubeconfig with %s = %d %s, want 502 naming %s and not the cluster id", name, status, body, tc.field)
				}
			})
		}
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the exec plugin of a stored kubeconfig ran (marker file: %v)", err)
		}
		for _, a := range sent {
			if strings.Contains(a, "service-own-secret") || strings.Contains(a, "from-plugin") {
				t.Errorf("the team's server was sent %q", a)
			}
		}

		// A team the operator does not name: refused at registration, and a row it
		// registered earlier is not used.
		teamC, tokenC := e.team("team-c")
		status, body := e.do("POST", "/api/v1/clusters", tokenC, map[string]any{"name": "prod", "in_cluster": true})
		if status != http.StatusForbidden || !strings.Contains(string(body), `"in_cluster_not_allowed"`) || !strings.Contains(string(body), "clusters.in_cluster_teams") {
			t.Errorf("in_cluster for a team not allowed = %d %s, want 403 in_cluster_not_allowed naming the setting", status, body)
		}
		old, err := db.CreateCluster(ctx, store.Cluster{TeamID: teamC.ID, Name: "prod", Access: store.ClusterInCluster})
		if err != nil {
			t.Fatal(err)
		}
		status, body = e.do("GET", "/api/v1/clusters/prod/repos/suggestions", tokenC, nil)
		if status != http.StatusBadGateway || !strings.Contains(string(body), "clusters.in_cluster_teams") || strings.Contains(string(body), old.ID) {
			t.Errorf("suggestions of a stored in-cluster row of a team not allowed = %d %s, want 502 naming the setting", status, body)
		}
		// An allowed team outside a pod learns that, without the service's own paths
		// or variables.
		if status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "here", "in_cluster": true}); status != http.StatusCreated {
			t.Fatalf("in_cluster for an allowed team = %d %s", status, body)
		}
		t.Setenv("KUBERNETES_SERVICE_HOST", "")
		status, body = e.do("GET", "/api/v1/clusters/here/repos/suggestions", e.tokenA, nil)
		if status != http.StatusBadGateway || !strings.Contains(string(body), "service account is not available") ||
			strings.Contains(string(body), "KUBERNETES_SERVICE") || strings.Contains(string(body), "/var/run/secrets") {
			t.Errorf("suggestions of an in-cluster cluster outside a pod = %d %s", status, body)
		}
		if !strings.Contains(e.logs.String(), "KUBERNETES_SERVICE_HOST") {
			t.Errorf("the operator's log does not say why the service account cannot be used:\n%s", e.logs.String())
		}
	})
}

// TestRegisterClusterRefusesUnverifiedTLSUnlessAllowed: a kubeconfig with
// insecure-skip-tls-verify is refused invalid_kubeconfig naming the setting and
// certificate-authority-data, at registration and replacement, and nothing is
// stored; where the operator allows it, both answer with a warning naming it.
func TestRegisterClusterRefusesUnverifiedTLSUnlessAllowed(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		insecure := strings.Replace(kubeconfig, "    server: https://prod.example:6443\n",
			"    server: https://prod.example:6443\n    insecure-skip-tls-verify: true\n", 1)
		const field = "clusters[prod].insecure-skip-tls-verify"
		refused := func(what string, status int, body []byte) {
			t.Helper()
			if status != http.StatusBadRequest || !strings.Contains(string(body), `"invalid_kubeconfig"`) ||
				!strings.Contains(string(body), field) || !strings.Contains(string(body), "certificate-authority-data") {
				t.Errorf("%s = %d %s, want 400 invalid_kubeconfig naming %s and certificate-authority-data", what, status, body, field)
			}
		}
		status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "prod", "kubeconfig": insecure})
		refused("register", status, body)
		if _, err := db.ClusterByName(context.Background(), e.teamA.ID, "prod"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the cluster was stored (%v)", err)
		}
		if status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "prod", "kubeconfig": kubeconfig}); status != http.StatusCreated || strings.Contains(string(body), "warnings") {
			t.Fatalf("register verified = %d %s, want 201 without warnings", status, body)
		}
		status, body = e.do("PUT", "/api/v1/clusters/prod/kubeconfig", e.tokenA, map[string]any{"kubeconfig": insecure})
		refused("replace", status, body)

		e.api.AllowInsecureTLS = true
		warned := func(what string, status, want int, body []byte) {
			t.Helper()
			var got setup.Cluster
			if err := json.Unmarshal(body, &got); status != want || err != nil || len(got.Warnings) != 1 ||
				!strings.HasPrefix(got.Warnings[0], field+": ") || !strings.Contains(got.Warnings[0], "certificate-authority-data") {
				t.Errorf("%s allowed = %d %s, want %d with a warning naming %s", what, status, body, want, field)
			}
		}
		status, body = e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "stage", "kubeconfig": insecure})
		warned("register", status, http.StatusCreated, body)
		status, body = e.do("PUT", "/api/v1/clusters/prod/kubeconfig", e.tokenA, map[string]any{"kubeconfig": insecure})
		warned("replace", status, http.StatusOK, body)

		// The audit trail says so too: the registration and the replacement
		// accepted with the operator's setting carry its warning, the verified
		// registration none.
		events, err := db.ListAuditEvents(context.Background(), store.AuditFilter{SubjectType: "cluster", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		warnedEvents := map[string]int{}
		for _, ev := range events {
			var detail struct {
				Name     string   `json:"name"`
				Warnings []string `json:"warnings"`
			}
			if err := json.Unmarshal(ev.Detail, &detail); err != nil {
				t.Fatalf("audit detail %s: %v", ev.Detail, err)
			}
			for _, w := range detail.Warnings {
				if !strings.HasPrefix(w, field+": ") || !strings.Contains(w, "certificate-authority-data") {
					t.Errorf("audit event %s of %s warns %q, want the warning naming %s", ev.Action, detail.Name, w, field)
				}
			}
			if len(detail.Warnings) > 0 {
				warnedEvents[ev.Action+" "+detail.Name]++
			}
		}
		want := map[string]int{"cluster.create stage": 1, "cluster.kubeconfig prod": 1}
		if fmt.Sprint(warnedEvents) != fmt.Sprint(want) {
			t.Errorf("audit events with warnings = %v, want %v (every event: %d)", warnedEvents, want, len(events))
		}
	})
}

// TestRegisterClusterRefusesMisspeltSettings: a kubeconfig with a field
// kubeconfigs do not have (a misspelt token) is refused at registration and
// replacement with invalid_kubeconfig naming the entry, the field and the setting
// it likely is, never the value, and nothing is stored.
func TestRegisterClusterRefusesMisspeltSettings(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		misspelt := strings.Replace(kubeconfig, "    token: kube-token-do-not-leak", "    tokn: kube-token-do-not-leak", 1)
		const want = `users[admin].user: unknown field \"tokn\" (did you mean \"token\"?)`
		refused := func(what string, status int, body []byte) {
			t.Helper()
			if status != http.StatusBadRequest || !strings.Contains(string(body), `"invalid_kubeconfig"`) ||
				!strings.Contains(string(body), want) || strings.Contains(string(body), "kube-token-do-not-leak") {
				t.Errorf("%s = %d %s, want 400 invalid_kubeconfig saying %s without the value", what, status, body, want)
			}
		}
		status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "prod", "kubeconfig": misspelt})
		refused("register", status, body)
		if _, err := db.ClusterByName(context.Background(), e.teamA.ID, "prod"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the cluster was stored (%v)", err)
		}
		if status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "prod", "kubeconfig": kubeconfig}); status != http.StatusCreated {
			t.Fatalf("register = %d %s", status, body)
		}
		status, body = e.do("PUT", "/api/v1/clusters/prod/kubeconfig", e.tokenA, map[string]any{"kubeconfig": misspelt})
		refused("replace", status, body)
	})
}
