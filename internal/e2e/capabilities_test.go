package e2e_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/kube/kubetest"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// capsGroupVersion serves kind Gauge only on the cluster capsEdge starts.
const capsGroupVersion = "caps.e2e.kukie.example/v1"

// capsChart is a chart whose objects say what it was told about its cluster:
// a ConfigMap with .Capabilities.KubeVersion, and a Gauge only where the
// cluster serves Gauges. Its objects are named after the values' suffix, so a
// pull request changing the suffix shows every object whole.
var capsChart = map[string]string{
	"apps/caps/Chart.yaml":  "apiVersion: v2\nname: caps\nversion: 0.1.0\n",
	"apps/caps/values.yaml": "suffix: blue\n",
	"apps/caps/templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: caps-{{ .Values.suffix }}
data:
  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}
`,
	"apps/caps/templates/gauge.yaml": `{{- if .Capabilities.APIVersions.Has "` + capsGroupVersion + `/Gauge" }}
apiVersion: ` + capsGroupVersion + `
kind: Gauge
metadata:
  name: caps-{{ .Values.suffix }}
{{- end }}
`,
}

// capsEdge starts an API server of its own that serves Gauges, with Argo CD's
// namespace, and returns it and its version as Helm's .Capabilities has it.
func capsEdge(t *testing.T) (*kubetest.Env, string) {
	t.Helper()
	edge := kubetest.StartPrivate(t, kubetest.Options{})
	crd, err := kubetest.DecodeObjects([]byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gauges.caps.e2e.kukie.example
spec:
  group: caps.e2e.kukie.example
  scope: Namespaced
  names: {plural: gauges, singular: gauge, kind: Gauge, listKind: GaugeList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	edge.Create(t, crd...)
	disc, err := discovery.NewDiscoveryClientForConfig(edge.Config)
	if err != nil {
		t.Fatal(err)
	}
	// Served once discovery lists it; the service reads discovery only later.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if list, err := disc.ServerResourcesForGroupVersion(capsGroupVersion); err == nil && len(list.APIResources) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not served", capsGroupVersion)
		}
		time.Sleep(50 * time.Millisecond)
	}
	info, err := disc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	v, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		t.Fatal(err)
	}
	return edge, v.String()
}

// helmApp is the Application of capsChart in namespace ns of a cluster.
func (s *service) helmApp(ns, name, server string) *unstructured.Unstructured {
	s.t.Helper()
	app := kubetest.Application(kubetest.App{Namespace: ns, Name: name, DestinationNamespace: "caps", RepoURL: s.repoURL, Path: "apps/caps"})
	if err := unstructured.SetNestedField(app.Object, "Helm", "status", "sourceType"); err != nil {
		s.t.Fatal(err)
	}
	if server != "" {
		if err := unstructured.SetNestedField(app.Object, server, "spec", "destination", "server"); err != nil {
			s.t.Fatal(err)
		}
	}
	return app
}

// appSection is the part of a check run's text that shows app's diff.
func appSection(t *testing.T, text, app string) string {
	t.Helper()
	_, rest, ok := strings.Cut(text, "### "+app+"\n")
	if !ok {
		t.Fatalf("the check run shows no diff of %s:\n%s", app, text)
	}
	section, _, _ := strings.Cut(rest, "\n### ")
	return section
}

// A Helm chart renders, in the pull request check and the repository view, with
// the capabilities of the cluster each Application deploys to, as Argo CD renders
// it there: the Application in cluster edge, whose API server serves Gauges,
// renders its Gauge; the one in cluster prod, which does not, renders none; both
// see their API server's Kubernetes version, not Helm's default. An Application
// deploying to a cluster the service does not read renders with Helm's defaults,
// and the check and the view say so.
func TestHelmChartsRenderWithTheirClustersCapabilities(t *testing.T) {
	edge, edgeVersion := capsEdge(t)
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.gh.PushCommit(t, s.repo, "main", capsChart, githubtest.DefaultAuthor)

		edgeNS := edge.Namespace(t, "argocd")
		edgeApp := s.helmApp(edgeNS, "caps", "")
		edge.Create(t, edgeApp)
		// The server outlives this run; the next one must not see this app.
		t.Cleanup(func() {
			if err := edge.Client.Delete(context.Background(), edgeApp); err != nil {
				t.Errorf("delete %s: %v", edgeApp.GetName(), err)
			}
		})
		s.kube.Create(t, s.helmApp(s.appNS, "caps", ""), s.helmApp(s.appNS, "caps-elsewhere", "https://spoke.example:6443"))
		s.mustJSON("POST", "/api/v1/clusters", map[string]any{"name": "edge", "kubeconfig": string(edge.Kubeconfig)}, http.StatusCreated, nil)
		s.mustJSON("POST", "/api/v1/clusters/edge/repos", map[string]any{"repo": s.repoURL}, http.StatusCreated, nil)

		head := s.gh.PushCommit(t, s.repo, "green", map[string]string{"apps/caps/values.yaml": "suffix: green\n"}, githubtest.DefaultAuthor)
		s.gh.OpenPullRequest(t, s.repo, "green", "main", "Green caps", githubtest.DefaultAuthor)
		run := s.completedRun(head)
		text, summary := run.GetOutput().GetText(), run.GetOutput().GetSummary()
		if run.GetConclusion() != github.ConclusionSuccess {
			t.Fatalf("run %s:\n%s\n%s", run.GetConclusion(), summary, text)
		}
		onEdge := appSection(t, text, edgeNS+"/caps (cluster edge)")
		onProd := appSection(t, text, s.appNS+"/caps (cluster prod)")
		elsewhere := appSection(t, text, s.appNS+"/caps-elsewhere (cluster prod)")
		if !strings.Contains(onEdge, "+kind: Gauge") || !strings.Contains(onEdge, edgeVersion) {
			t.Errorf("in cluster edge, which serves Gauges, at %s, the chart renders:\n%s", edgeVersion, onEdge)
		}
		if strings.Contains(onProd, "Gauge") || !strings.Contains(onProd, edgeVersion) {
			t.Errorf("in cluster prod, which serves no Gauges, at %s, the chart renders:\n%s", edgeVersion, onProd)
		}
		if strings.Contains(elsewhere, "Gauge") || strings.Contains(elsewhere, edgeVersion) {
			t.Errorf("deploying to a cluster the service does not read, the chart renders:\n%s", elsewhere)
		}
		const defaults = "rendered with Helm's default Kubernetes version and API versions"
		if !strings.Contains(summary, s.appNS+"/caps-elsewhere (cluster prod): "+defaults) || strings.Count(summary, defaults) != 1 {
			t.Errorf("the summary does not say, for that app alone, that it rendered with Helm's defaults:\n%s", summary)
		}
		if strings.Contains(summary+text, "spoke.example") {
			t.Errorf("the check shows the destination's address:\n%s\n%s", summary, text)
		}

		// The repository view renders the same way at the pull request's branch.
		views := map[string]struct {
			Apps []struct {
				Name, YAML, Warning string
			}
		}{}
		for _, cluster := range []string{"edge", "prod"} {
			v := views[cluster]
			s.mustJSON("GET", "/api/v1/clusters/"+cluster+"/repository?"+url.Values{"repo": {s.repoURL}, "revision": {"green"}}.Encode(), nil, http.StatusOK, &v)
			views[cluster] = v
		}
		seen := 0
		for cluster, v := range views {
			for _, a := range v.Apps {
				wantGauge, wantVersion, wantWarning := cluster == "edge", !strings.HasSuffix(a.Name, "/caps-elsewhere"), strings.HasSuffix(a.Name, "/caps-elsewhere")
				if !strings.HasSuffix(a.Name, "/caps") && !wantWarning {
					continue
				}
				seen++
				if strings.Contains(a.YAML, "kind: Gauge") != wantGauge || strings.Contains(a.YAML, edgeVersion) != wantVersion ||
					strings.HasPrefix(a.Warning, defaults) != wantWarning {
					t.Errorf("cluster %s's view of %s: warning %q, render:\n%s", cluster, a.Name, a.Warning, a.YAML)
				}
			}
		}
		if seen != 3 {
			t.Errorf("the views show %d of the 3 Helm apps: %+v", seen, views)
		}
	})
}
