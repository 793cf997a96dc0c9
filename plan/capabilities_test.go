package plan_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// capsChart is a chart whose Deployment takes its replicas from the values only
// on a cluster of Kubernetes 1.30 or later that serves kukie.example/v1 Probes;
// elsewhere it runs one replica whatever the values say.
var capsChart = map[string]string{
	"apps/chart/Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
	"apps/chart/values.yaml": "replicas: 3\n",
	"apps/chart/templates/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
{{- if and (semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version) (.Capabilities.APIVersions.Has "kukie.example/v1/Probe") }}
  replicas: {{ .Values.replicas }}
{{- else }}
  replicas: 1
{{- end }}
`,
}

// A Helm Application deploying to the cluster it is read from renders with that
// cluster's Kubernetes version and API versions, as Argo CD passes them to helm
// template: a chart that branches on them renders as it does there. One deploying
// to another cluster renders with Helm's defaults, without reading capabilities.
func TestHelmAppsRenderWithTheirClustersCapabilities(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := func(t *testing.T, db *store.DB, dest argocd.AppDestination) *env {
		e := newEnv(t, db)
		e.engine = cache.RenderEngine{}
		e.gh.PushCommit(t, repoName, "main", capsChart, githubtest.DefaultAuthor)
		e.cluster.app.Spec.Source.Path = "apps/chart"
		e.cluster.app.Spec.Destination = dest
		e.cluster.app.Status.SourceType = "Helm"
		e.cluster.caps = kube.Capabilities{KubeVersion: "1.31.4", APIVersions: []string{"apps/v1", "apps/v1/Deployment", "kukie.example/v1", "kukie.example/v1/Probe", "v1", "v1/ConfigMap"}}
		return e
	}
	t.Run("in-cluster", func(t *testing.T) {
		forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
			e := setup(t, db, argocd.AppDestination{Server: argocd.InClusterServer, Namespace: "shop"})
			p := e.startedPipeline(ctx, plan.Hooks{})
			pl := e.submitOpen(ctx, p, scale(5, "caps"))
			pay, err := plan.PayloadOf(pl)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(pay.GitDiff, "apps/chart/values.yaml") || !strings.Contains(pay.GitDiff, "+replicas: 5") {
				t.Fatalf("git diff does not set the values key:\n%s", pay.GitDiff)
			}
			if e.cluster.capsReads == 0 {
				t.Fatal("the cluster's capabilities were never read")
			}
		})
	})
	t.Run("another cluster", func(t *testing.T) {
		forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
			e := setup(t, db, argocd.AppDestination{Server: "https://edge.example:6443", Namespace: "shop"})
			p := e.pipeline(plan.Hooks{})
			pl, _, err := p.Submit(ctx, e.team.ID, "team:x", scale(5, "caps"))
			if err != nil {
				t.Fatal(err)
			}
			pl = e.waitFor(pl.Code, "refused", func(p store.Plan) bool { return p.Status == string(plan.StatusRefused) })
			if e.cluster.capsReads != 0 {
				t.Fatalf("capabilities read %d times for an app deploying to another cluster", e.cluster.capsReads)
			}
			t.Logf("refused with Helm's defaults: %s", pl.StatusReason)
		})
	})
	// A cluster that cannot be asked leaves its Helm apps to Helm's defaults
	// (here the chart then renders no Probe) and the plan goes on, saying so.
	t.Run("cluster that cannot be asked", func(t *testing.T) {
		forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
			e := setup(t, db, argocd.AppDestination{Server: argocd.InClusterServer, Namespace: "shop"})
			e.gh.PushCommit(t, repoName, "main", map[string]string{"apps/chart/templates/deploy.yaml": probeGatedDeployment}, githubtest.DefaultAuthor)
			e.cluster.capsErr = &kube.Error{Class: argocd.FailureUnreachable, Op: "discover served kinds", Err: errors.New("dial tcp 10.0.0.9:6443: connect: connection refused")}
			p := e.startedPipeline(ctx, plan.Hooks{})
			pl := e.submitOpen(ctx, p, scale(5, "caps"))
			pay, err := plan.PayloadOf(pl)
			if err != nil {
				t.Fatal(err)
			}
			want := "argocd/web: rendered with Helm's default Kubernetes version and API versions (.Capabilities): the cluster could not be asked for them (unreachable)"
			if !slices.Contains(pay.Warnings, want) || strings.Contains(strings.Join(pay.Warnings, "\n"), "10.0.0.9") {
				t.Fatalf("warnings %q, want %q", pay.Warnings, want)
			}
			if !strings.Contains(pay.GitDiff, "+replicas: 5") {
				t.Fatalf("git diff:\n%s", pay.GitDiff)
			}
		})
	})
}

// probeGatedDeployment adds a Probe where the cluster serves them, and takes
// the Deployment's replicas from the values on any cluster.
const probeGatedDeployment = `{{- if .Capabilities.APIVersions.Has "kukie.example/v1/Probe" }}
apiVersion: kukie.example/v1
kind: Probe
metadata: {name: web, namespace: shop}
---
{{- end }}
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: {{ .Values.replicas }}
`
