package plan_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// appOfAppsRepo is a chart whose replicas the web Application sets as a
// parameter, and the manifest of that Application, which the root app deploys
// from apps/root.
var appOfAppsRepo = map[string]string{
	"apps/chart/Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
	"apps/chart/values.yaml": "replicas: 1\n",
	"apps/chart/templates/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: {{ .Values.replicas }}
`,
	"apps/root/web.yaml": `# Deployed by the root app.
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: web
  namespace: argocd
spec:
  project: default
  source:
    repoURL: https://github.com/acme/deploy.git
    targetRevision: main
    path: apps/chart
    helm:
      parameters:
        - name: replicas
          value: "3" # launch sizing
  destination: {namespace: shop}
`,
}

// A Helm value the Application sets itself, in an Application the repository
// defines and another app deploys (app-of-apps), is changed through the pull
// request by editing that manifest, the cluster's Application being the one
// the repository says; a manifest that says otherwise than the cluster is
// refused, naming it.
func TestHelmValueTheApplicationSetsIsEditedInItsManifest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := func(t *testing.T, db *store.DB, clusterValue string) *env {
		e := newEnv(t, db)
		e.engine = cache.RenderEngine{}
		e.gh.PushCommit(t, repoName, "main", appOfAppsRepo, githubtest.DefaultAuthor)
		e.cluster.app.Spec.Source.Path = "apps/chart"
		e.cluster.app.Spec.Source.Helm = &argocd.AppSourceHelm{Parameters: []argocd.AppHelmParameter{{Name: "replicas", Value: clusterValue}}}
		e.cluster.app.Status.SourceType = "Helm"
		e.cluster.others = []argocd.Application{{Name: "root", Namespace: "argocd", Spec: argocd.AppSpec{
			Source:      &argocd.AppSource{RepoURL: repoURL, Path: "apps/root", TargetRevision: "main"},
			Destination: argocd.AppDestination{Namespace: "argocd"},
		}, Status: argocd.AppStatus{SourceType: "Directory"}}}
		return e
	}
	t.Run("edited", func(t *testing.T) {
		forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
			e := setup(t, db, "3")
			p := e.startedPipeline(ctx, plan.Hooks{})
			pl := e.submitOpen(ctx, p, scale(5, "app-of-apps"))
			pay, err := plan.PayloadOf(pl)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(pay.GitDiff, "apps/root/web.yaml") || !strings.Contains(pay.GitDiff, `+          value: "5" # launch sizing`) {
				t.Fatalf("git diff does not edit the Application's parameter:\n%s", pay.GitDiff)
			}
			got, ok := e.gh.FileAt(t, repoName, pl.Branch, "apps/root/web.yaml")
			if !ok || got != strings.Replace(appOfAppsRepo["apps/root/web.yaml"], `value: "3"`, `value: "5"`, 1) {
				t.Fatalf("the pull request's apps/root/web.yaml:\n%s", got)
			}
			if chart, _ := e.gh.FileAt(t, repoName, pl.Branch, "apps/chart/values.yaml"); chart != appOfAppsRepo["apps/chart/values.yaml"] {
				t.Fatalf("the chart's values changed too:\n%s", chart)
			}
			var root bool
			for _, d := range pay.ClusterDiff {
				root = root || (d.App == "argocd/root" && d.Kind == "Application" && d.Name == "web")
			}
			if !root {
				t.Fatalf("the cluster diff does not show the root app changing the web Application: %+v", pay.ClusterDiff)
			}
		})
	})
	t.Run("manifest differs from the cluster", func(t *testing.T) {
		forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
			e := setup(t, db, "4")
			p := e.startedPipeline(ctx, plan.Hooks{})
			pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(5, "app-of-apps-diverged"))
			if err != nil {
				t.Fatal(err)
			}
			pl = e.waitStatus(pl.Code, plan.StatusRefused)
			if !strings.Contains(pl.StatusReason, "apps/root/web.yaml") || !strings.Contains(pl.StatusReason, "spec.source.helm.parameters there is not what the Application in the cluster has") {
				t.Fatalf("refusal reason: %s", pl.StatusReason)
			}
		})
	})
}
