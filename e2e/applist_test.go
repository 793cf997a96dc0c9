//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/e2e/argocdharness"
	"github.com/kukie/kukie-gitops/kube"
)

// testAppListAndDetail: the app list and detail the service shows people agree with
// the Application status real Argo CD writes — the same fields `argocd app get` and
// `argocd app list` print — for a healthy synced app, an app never synced (OutOfSync)
// and an app whose source path does not exist (a ComparisonError).
func (s *suite) testAppListAndDetail(t *testing.T) {
	const healthy, drift, broken = "list-checkout", "list-drift", "list-broken"
	s.deployApp(t, argocdharness.Application{Name: healthy, Path: "apps/checkout", DestinationNamespace: "e2e-list-checkout", Automated: true})
	s.argo.PlayKubelet(t, "e2e-list-checkout", "checkout", argocdharness.RolloutComplete)
	s.argo.WaitApplication(t, argocdharness.Namespace, healthy, syncTimeout, "health Healthy", func(u *unstructured.Unstructured) bool {
		return argocdharness.AppStatus(u).Health.Status == argocd.HealthHealthy
	})
	s.argo.CreateApplication(t, argocdharness.Application{Name: drift, RepoURL: s.repoURL, Path: "apps/checkout", TargetRevision: "main", DestinationNamespace: "e2e-list-drift"})
	s.argo.WaitApplication(t, argocdharness.Namespace, drift, syncTimeout, "OutOfSync", func(u *unstructured.Unstructured) bool {
		return argocdharness.AppStatus(u).Sync.Status == argocd.SyncOutOfSync
	})
	s.argo.CreateApplication(t, argocdharness.Application{Name: broken, RepoURL: s.repoURL, Path: "apps/does-not-exist", TargetRevision: "main", DestinationNamespace: "e2e-list-broken"})
	s.argo.WaitApplication(t, argocdharness.Namespace, broken, syncTimeout, "a ComparisonError condition", func(u *unstructured.Unstructured) bool {
		return strings.Contains(fmt.Sprint(u.Object["status"]), "ComparisonError")
	})

	cluster := s.cluster(t)
	t.Run("list", func(t *testing.T) {
		// Argo CD keeps reconciling; compare against a raw listing taken right before
		// and after ours, and retry while they differ.
		var list argocd.AppList
		var raw []unstructured.Unstructured
		argocdharness.Wait(t, 30*time.Second, "a stable listing", func(ctx context.Context) (bool, error) {
			before, err := s.rawApps(ctx)
			if err != nil {
				return false, err
			}
			if list, err = cluster.AppList(ctx, kube.Refresh); err != nil {
				return false, err
			}
			after, err := s.rawApps(ctx)
			if err != nil {
				return false, err
			}
			raw = after
			return reflect.DeepEqual(listView(before), listView(after)), nil
		})

		want := expectedList(raw)
		if list.Total != want.Total || list.Synced != want.Synced || list.OutOfSync != want.OutOfSync || list.SelfHeal != want.SelfHeal {
			t.Errorf("counts total/synced/out of sync/self-heal = %d/%d/%d/%d, argo cd status says %d/%d/%d/%d",
				list.Total, list.Synced, list.OutOfSync, list.SelfHeal, want.Total, want.Synced, want.OutOfSync, want.SelfHeal)
		}
		if !reflect.DeepEqual(list.Repos, want.Repos) {
			t.Errorf("repos = %q, want %q", list.Repos, want.Repos)
		}
		byKey := map[string]argocd.AppListItem{}
		seenHealthy := false
		for _, item := range list.Apps {
			byKey[item.Namespace+"/"+item.Name] = item
			if len(item.Problems) == 0 {
				seenHealthy = true
			} else if seenHealthy {
				t.Errorf("problem app %s/%s listed after an app without problems", item.Namespace, item.Name)
			}
		}
		for key, w := range listView(raw) {
			got, ok := byKey[key]
			if !ok {
				t.Errorf("application %s missing from the list", key)
				continue
			}
			if g := (appView{Sync: got.Sync, Health: got.Health, RepoURL: got.RepoURL, Path: got.Path, TargetRevision: got.TargetRevision}); g != w {
				t.Errorf("%s: list shows %+v, argo cd status says %+v", key, g, w)
			}
		}
		for name, wantProblem := range map[string]bool{healthy: false, drift: true, broken: true} {
			if got := len(byKey[argocdharness.Namespace+"/"+name].Problems) > 0; got != wantProblem {
				t.Errorf("%s: has problems %t (%q), want %t", name, got, byKey[argocdharness.Namespace+"/"+name].Problems, wantProblem)
			}
		}
	})

	t.Run("detail", func(t *testing.T) {
		for _, name := range []string{healthy, drift, broken} {
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				detail, err := cluster.AppDetail(ctx, argocdharness.Namespace, name, kube.Refresh)
				if err != nil {
					t.Fatalf("app detail: %v", err)
				}
				u, err := s.argo.GetApplication(ctx, argocdharness.Namespace, name)
				if err != nil {
					t.Fatal(err)
				}
				status := func(path ...string) string {
					v, _, _ := unstructured.NestedString(u.Object, append([]string{"status"}, path...)...)
					return v
				}
				if detail.Sync != status("sync", "status") || detail.Health != status("health", "status") || detail.Revision != status("sync", "revision") {
					t.Errorf("detail sync %s health %s revision %s, argo cd status says %s %s %s", detail.Sync, detail.Health, detail.Revision,
						status("sync", "status"), status("health", "status"), status("sync", "revision"))
				}
				if detail.SourceType != status("sourceType") {
					t.Errorf("detail source type %q, argo cd status says %q", detail.SourceType, status("sourceType"))
				}

				var wantOutOfSync, wantErrors, wantWarnings []string
				resources, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
				for _, r := range resources {
					r := r.(map[string]any)
					if field(r, "status") == argocd.SyncOutOfSync {
						wantOutOfSync = append(wantOutOfSync, strings.Join([]string{field(r, "group"), field(r, "kind"), field(r, "namespace"), field(r, "name")}, "/"))
					}
				}
				conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
				for _, c := range conditions {
					c := c.(map[string]any)
					text := field(c, "type") + ": " + field(c, "message")
					if strings.HasSuffix(field(c, "type"), "Error") {
						wantErrors = append(wantErrors, text)
					} else {
						wantWarnings = append(wantWarnings, text)
					}
				}
				var gotOutOfSync, gotErrors, gotWarnings []string
				for _, r := range detail.OutOfSync {
					gotOutOfSync = append(gotOutOfSync, strings.Join([]string{r.Group, r.Kind, r.Namespace, r.Name}, "/"))
				}
				for _, c := range detail.Errors {
					gotErrors = append(gotErrors, c.Type+": "+c.Message)
				}
				for _, c := range detail.Warnings {
					gotWarnings = append(gotWarnings, c.Type+": "+c.Message)
				}
				for what, pair := range map[string][2][]string{
					"out-of-sync resources": {gotOutOfSync, wantOutOfSync},
					"errors":                {gotErrors, wantErrors},
					"warnings":              {gotWarnings, wantWarnings},
				} {
					sort.Strings(pair[0])
					sort.Strings(pair[1])
					if strings.Join(pair[0], "\n") != strings.Join(pair[1], "\n") {
						t.Errorf("detail %s:\n%s\nargo cd status says:\n%s", what, strings.Join(pair[0], "\n"), strings.Join(pair[1], "\n"))
					}
				}

				switch name {
				case drift:
					if len(detail.OutOfSync) == 0 {
						t.Errorf("never-synced app shows no OutOfSync resources")
					}
				case broken:
					if len(detail.Errors) == 0 || !strings.Contains(detail.Errors[0].Message, "apps/does-not-exist") {
						t.Errorf("detail errors %+v do not name the missing path", detail.Errors)
					}
				}
			})
		}
	})

	t.Run("app in a namespace that does not exist", func(t *testing.T) {
		_, err := cluster.AppDetail(context.Background(), "no-such-namespace", "web", kube.Refresh)
		if got := kube.ClassOf(err); got != argocd.FailureNotFound {
			t.Fatalf("error class %q (%v), want %q", got, err, argocd.FailureNotFound)
		}
	})
}

// rawApps lists every Application in the cluster straight from the API server.
func (s *suite) rawApps(ctx context.Context) ([]unstructured.Unstructured, error) {
	list, err := s.argo.Dynamic.Resource(argocdharness.ApplicationResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list applications: %w", err)
	}
	return list.Items, nil
}

// field reads a string field of a raw object; "" when absent.
func field(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// appView is what the list shows of one app, read from the raw object.
type appView struct {
	Sync, Health, RepoURL, Path, TargetRevision string
}

func listView(apps []unstructured.Unstructured) map[string]appView {
	out := map[string]appView{}
	for _, u := range apps {
		str := func(path ...string) string {
			v, _, _ := unstructured.NestedString(u.Object, path...)
			return v
		}
		out[u.GetNamespace()+"/"+u.GetName()] = appView{
			Sync:           str("status", "sync", "status"),
			Health:         str("status", "health", "status"),
			RepoURL:        str("spec", "source", "repoURL"),
			Path:           str("spec", "source", "path"),
			TargetRevision: str("spec", "source", "targetRevision"),
		}
	}
	return out
}

// expectedList computes the list counters from raw Applications.
func expectedList(apps []unstructured.Unstructured) argocd.AppList {
	l := argocd.AppList{Total: len(apps), Repos: []string{}}
	repos := map[string]bool{}
	for _, u := range apps {
		sync, _, _ := unstructured.NestedString(u.Object, "status", "sync", "status")
		switch sync {
		case argocd.SyncSynced:
			l.Synced++
		case argocd.SyncOutOfSync:
			l.OutOfSync++
		}
		automated, hasAutomated, _ := unstructured.NestedMap(u.Object, "spec", "syncPolicy", "automated")
		enabled, hasEnabled, _ := unstructured.NestedBool(u.Object, "spec", "syncPolicy", "automated", "enabled")
		if hasAutomated && automated["selfHeal"] == true && (!hasEnabled || enabled) {
			l.SelfHeal++
		}
		if repo, _, _ := unstructured.NestedString(u.Object, "spec", "source", "repoURL"); repo != "" && !repos[repo] {
			repos[repo] = true
			l.Repos = append(l.Repos, repo)
		}
	}
	sort.Strings(l.Repos)
	return l
}
