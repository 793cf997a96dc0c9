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
	deadline := time.Now().Add(eventually)
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

// capsDefaults begins what a check or view says of a Helm app rendered with
// Helm's default capabilities.
const capsDefaults = "rendered with Helm's default Kubernetes version and API versions"

// checkCapsRender fails t unless app's diff in the check run's text renders the
// Gauge (when gauge) and the Kubernetes version version (when atVersion), and
// neither otherwise; where says of the app's cluster, for the failure.
func checkCapsRender(t *testing.T, text, app string, gauge, atVersion bool, version, where string) {
	t.Helper()
	section := appSection(t, text, app)
	if strings.Contains(section, "Gauge") != gauge || strings.Contains(section, "+kind: Gauge") != gauge || strings.Contains(section, version) != atVersion {
		t.Errorf("%s, the chart renders (Gauge wanted %t, version %s wanted %t):\n%s", where, gauge, version, atVersion, section)
	}
}

// checkDefaultsFor fails t unless the check run's summary says, of app alone,
// that it rendered with Helm's defaults.
func checkDefaultsFor(t *testing.T, summary, app string) {
	t.Helper()
	if !strings.Contains(summary, app+": `"+capsDefaults) || strings.Count(summary, capsDefaults) != 1 {
		t.Errorf("the summary does not say, for %s alone, that it rendered with Helm's defaults:\n%s", app, summary)
	}
}

// greenCapsPullRequest opens a pull request changing capsChart's suffix to green
// and returns its head and its kukie/render run's text and summary, once that run
// has concluded success.
func (s *service) greenCapsPullRequest() (head, text, summary string) {
	s.t.Helper()
	head = s.gh.PushCommit(s.t, s.repo, "green", map[string]string{"apps/caps/values.yaml": "suffix: green\n"}, githubtest.DefaultAuthor)
	s.gh.OpenPullRequest(s.t, s.repo, "green", "main", "Green caps", githubtest.DefaultAuthor)
	run := s.completedRun(head)
	text, summary = run.GetOutput().GetText(), run.GetOutput().GetSummary()
	if run.GetConclusion() != github.ConclusionSuccess {
		s.t.Fatalf("run %s:\n%s\n%s", run.GetConclusion(), summary, text)
	}
	return head, text, summary
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

		_, text, summary := s.greenCapsPullRequest()
		checkCapsRender(t, text, edgeNS+"/caps (cluster edge)", true, true, edgeVersion, "in cluster edge, which serves Gauges")
		checkCapsRender(t, text, s.appNS+"/caps (cluster prod)", false, true, edgeVersion, "in cluster prod, which serves no Gauges")
		checkCapsRender(t, text, s.appNS+"/caps-elsewhere (cluster prod)", false, false, edgeVersion, "deploying to a cluster the service does not read")
		checkDefaultsFor(t, summary, s.appNS+"/caps-elsewhere (cluster prod)")
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
					strings.HasPrefix(a.Warning, capsDefaults) != wantWarning {
					t.Errorf("cluster %s's view of %s: warning %q, render:\n%s", cluster, a.Name, a.Warning, a.YAML)
				}
			}
		}
		if seen != 3 {
			t.Errorf("the views show %d of the 3 Helm apps: %+v", seen, views)
		}
	})
}

// An Application deploying to another cluster than the one it is read from,
// which the team registered with the service too, renders with that cluster's
// capabilities and is dry-run there, as one deploying in-cluster is with its own:
// the app in cluster prod deploying to edge's API server (its address written
// with a trailing slash) renders its Gauge at edge's version, and both its changed
// objects, the Gauge among them, which prod does not serve, are dry-run and
// accepted. One deploying to an address no registered cluster has keeps Helm's
// defaults and is not dry-run, and the check says so without the address. The
// repository view, which renders as a plan does, renders them alike.
func TestHelmAppDeployingToARegisteredClusterUsesIt(t *testing.T) {
	edge, edgeVersion := capsEdge(t)
	ns, err := kubetest.DecodeObjects([]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: caps\n"))
	if err != nil {
		t.Fatal(err)
	}
	edge.Create(t, ns...)
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		files := map[string]string{".kukie.yml": "version: 1\nrules:\n  dry_run:\n    level: error\n"}
		for path, text := range capsChart {
			files[path] = text
		}
		s.gh.PushCommit(t, s.repo, "main", files, githubtest.DefaultAuthor)
		s.kube.Create(t, s.helmApp(s.appNS, "caps-edge", edge.Config.Host+"/"), s.helmApp(s.appNS, "caps-elsewhere", "https://spoke.example:6443"))
		s.mustJSON("POST", "/api/v1/clusters", map[string]any{"name": "edge", "kubeconfig": string(edge.Kubeconfig)}, http.StatusCreated, nil)

		head, text, summary := s.greenCapsPullRequest()
		checkCapsRender(t, text, s.appNS+"/caps-edge (cluster prod)", true, true, edgeVersion, "deploying to cluster edge, which serves Gauges")
		checkCapsRender(t, text, s.appNS+"/caps-elsewhere (cluster prod)", false, false, edgeVersion, "deploying to a cluster the team has not registered")
		checkDefaultsFor(t, summary, s.appNS+"/caps-elsewhere (cluster prod)")

		polRun := s.completedRunNamed(head, github.PolicyCheckRunName)
		pol := polRun.GetOutput().GetSummary()
		if polRun.GetConclusion() != github.ConclusionSuccess || !strings.Contains(pol, "2 changed objects sent, 0 refused") ||
			!strings.Contains(pol, "not sent for "+s.appNS+"/caps-elsewhere (cluster prod)") {
			t.Errorf("kukie/policy %s:\n%s", polRun.GetConclusion(), pol)
		}
		if strings.Contains(summary+text+pol, "spoke.example") || strings.Contains(summary+text+pol, edge.Config.Host) {
			t.Errorf("the checks show a destination's address:\n%s\n%s\n%s", summary, text, pol)
		}

		// prod's repository view, whose renders plans share, renders them alike.
		var view struct {
			Apps []struct {
				Name, YAML, Warning string
			}
		}
		s.mustJSON("GET", "/api/v1/clusters/prod/repository?"+url.Values{"repo": {s.repoURL}, "revision": {"green"}}.Encode(), nil, http.StatusOK, &view)
		seen := 0
		for _, a := range view.Apps {
			toEdge := strings.HasSuffix(a.Name, "/caps-edge")
			if !toEdge && !strings.HasSuffix(a.Name, "/caps-elsewhere") {
				continue
			}
			seen++
			if strings.Contains(a.YAML, "kind: Gauge") != toEdge || strings.Contains(a.YAML, edgeVersion) != toEdge ||
				strings.HasPrefix(a.Warning, capsDefaults) == toEdge {
				t.Errorf("the view of %s: warning %q, render:\n%s", a.Name, a.Warning, a.YAML)
			}
		}
		if seen != 2 {
			t.Errorf("the view shows %d of the 2 Helm apps: %+v", seen, view)
		}
	})
}
