package e2e_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
	kukie "github.com/kukie/kukie-gitops/service"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// watchRecheck bounds the service's watch requests in these tests, so revoked
// credentials are met within it.
const watchRecheck = 2 * time.Second

// deployingWithAccount runs the service with a poll of an hour, the cluster
// registered with a token of account, and a change merged and deploying, the merge
// not yet synced. Nothing but the watches can move the change within the hour.
func (s *service) deployingWithAccount(account *kubetest.Account, kubeconfig []byte) change {
	s.t.Helper()
	s.stop()
	s.cfg.Pipeline.DeployPollInterval, s.cfg.Pipeline.DeployTimeout = time.Hour, 2*time.Hour
	s.start(kukie.WithWatchRecheck(watchRecheck))
	s.putKubeconfig(kubeconfig)
	s.deployWeb("main")
	s.playKubelet(types.NamespacedName{Namespace: s.shopNS, Name: "web"}, func(r int64) map[string]any { return rolloutStatus(r, r, r) })
	c := s.waitStatus(s.submit("Deployment", "web", map[string]any{"replicas": map[string]any{"count": 4}}).Code, "pr_open")
	merge := s.gh.Merge(s.t, s.repo, int(c.PullRequest.Number), githubtest.MergeCommit)
	return s.waitFor(c.Code, "deploying, the merge not synced", func(c change) bool {
		return c.MergeSHA == merge && c.Status == "deploying" && c.Deployment != nil && c.Deployment.Message == "Argo CD has not synced the merge commit yet"
	})
}

// putKubeconfig replaces the cluster's kubeconfig through the team's cluster API.
func (s *service) putKubeconfig(kubeconfig []byte) {
	s.t.Helper()
	s.mustJSON("PUT", "/api/v1/clusters/"+s.cluster+"/kubeconfig", map[string]any{"kubeconfig": string(kubeconfig)}, http.StatusOK, nil)
}

// history is the plan's history, oldest first.
func (s *service) history(code string) []string {
	s.t.Helper()
	events, err := s.db.PlanEvents(context.Background(), code)
	if err != nil {
		s.t.Fatal(err)
	}
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = ev.Message
	}
	return out
}

// waitHistory waits until the plan's history has an event starting with prefix.
func (s *service) waitHistory(code, prefix string) string {
	s.t.Helper()
	var found string
	s.waitFor(code, "told "+prefix, func(change) bool {
		for _, m := range s.history(code) {
			if strings.HasPrefix(m, prefix) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// awaitRevoked waits until the API server refuses a read with kubeconfig: it
// caches a token's validation for a few seconds after the token was revoked.
func (s *service) awaitRevoked(kubeconfig []byte) {
	s.t.Helper()
	c, err := kube.NewClusters(kube.Options{}).Get("revoked", kube.Access{Kubeconfig: kubeconfig})
	if err != nil {
		s.t.Fatal(err)
	}
	ref := argocd.ResourceRef{Group: "apps", Kind: "Deployment", Namespace: s.shopNS, Name: "web"}
	deadline := time.Now().Add(eventually)
	for {
		_, err := c.GetResource(context.Background(), ref, kube.Fresh)
		if err != nil && strings.Contains(err.Error(), "Unauthorized") {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("a read with the revoked token still gives %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDeployFollowedAcrossAKubeconfigRotation: while a change is deploying, the
// team rotates the cluster's ServiceAccount token: it registers a kubeconfig with a
// new token and revokes the old one. The service's watches of the Application and
// the target start again with the new token, and the sync and rollout, done once
// the old token is refused, reach the plan through them: it is deployed, its
// history saying nothing of refused credentials.
func TestDeployFollowedAcrossAKubeconfigRotation(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		account := s.kube.NewAccount(t, "kukie")
		first, revokeFirst := account.Token(t, "token-1")
		c := s.deployingWithAccount(account, first)

		second, _ := account.Token(t, "token-2")
		s.putKubeconfig(second)
		revokeFirst()
		s.awaitRevoked(first)
		s.syncLikeArgo("web", "apps/web", "Directory", c.MergeSHA)
		if c := s.waitStatus(c.Code, "deployed"); c.Deployment == nil || c.Deployment.State != "succeeded" {
			t.Fatalf("deployed with deployment %+v, want succeeded", c.Deployment)
		}
		for _, m := range s.history(c.Code) {
			if strings.Contains(m, "rejected") || strings.Contains(m, "polling") {
				t.Fatalf("the history says %q: the rotation was not followed by watch", m)
			}
		}
	})
}

// TestRevokedCredentialsAreInTheDeployHistory: while a change is deploying, the
// cluster stops accepting the service's credentials: the token is revoked (401) or
// the account's binding deleted (403). The plan is woken and its history says the
// credentials were rejected and that it polls; the poll's read fails and says so.
// Once credentials work again (a new kubeconfig through the cluster API, the binding
// restored) the history says the plan is watched again, and the sync deploys it.
func TestRevokedCredentialsAreInTheDeployHistory(t *testing.T) {
	cases := map[string]struct {
		revoke  func(s *service, a *kubetest.Account, revokeToken func())
		restore func(s *service, a *kubetest.Account)
		says    string
	}{
		"token revoked": {
			revoke: func(s *service, _ *kubetest.Account, revokeToken func()) { revokeToken() },
			restore: func(s *service, a *kubetest.Account) {
				kc, _ := a.Token(s.t, "token-2")
				s.putKubeconfig(kc)
			},
			says: "Unauthorized",
		},
		"binding deleted": {
			revoke:  func(s *service, a *kubetest.Account, _ func()) { a.Unbind(s.t) },
			restore: func(s *service, a *kubetest.Account) { a.Bind(s.t) },
			says:    "forbidden",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			storetest.ForEach(t, func(t *testing.T, db *store.DB) {
				s := newService(t, db)
				account := s.kube.NewAccount(t, "kukie")
				kc, revokeToken := account.Token(t, "token-1")
				c := s.deployingWithAccount(account, kc)
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("history of %s:\n%s\ndeployment: %+v", c.Code, strings.Join(s.history(c.Code), "\n"), s.get(c.Code).Deployment)
					}
				})

				tc.revoke(s, account, revokeToken)
				note := s.waitHistory(c.Code, "cluster credentials were rejected: ")
				if !strings.Contains(note, tc.says) || !strings.HasSuffix(note, "following the deployment by polling every 1h0m0s until the cluster accepts them again") {
					t.Fatalf("the history says %q, want the refusal (%s) and the poll", note, tc.says)
				}
				s.waitFor(c.Code, "the poll's failed read", func(c change) bool {
					return c.Status == "deploying" && c.Deployment != nil && strings.HasPrefix(c.Deployment.Message, "reading the Application failed: ")
				})

				tc.restore(s, account)
				s.waitHistory(c.Code, "cluster credentials are accepted again; following the deployment by watch")
				s.syncLikeArgo("web", "apps/web", "Directory", c.MergeSHA)
				s.waitStatus(c.Code, "deployed")
			})
		})
	}
}
