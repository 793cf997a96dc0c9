package render

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

// With KUKIE_HELM_BIN pointing at a helm CLI (hack/helm-cli.sh builds the one
// Argo CD runs) the Helm benchmarks also report the ratio of a plan to two "helm
// template" runs of the chart with the app's values: what a person checking by
// hand would do.

// helmBenchRepo writes a chart of n objects (a Deployment, a Service and a
// ConfigMap per service, from range templates over the values' service list) and
// an environment's values file pinning each service's replicas and tag.
func helmBenchRepo(b *testing.B, n int) (string, Application) {
	b.Helper()
	files := map[string]string{
		"charts/platform/Chart.yaml": "apiVersion: v2\nname: platform\nversion: 1.0.0\nappVersion: \"1.0.0\"\n",
		"charts/platform/templates/_helpers.tpl": `{{- define "platform.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: {{ $.release }}
{{- end }}
`,
		"charts/platform/templates/deployments.yaml": `{{- range .Values.services }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  labels:
    {{- include "platform.labels" (dict "name" .name "release" $.Release.Name) | nindent 4 }}
spec:
  replicas: {{ .replicas | default $.Values.defaults.replicas }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .name }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ .name }}
    spec:
      containers:
        - name: {{ .name }}
          image: "{{ $.Values.image.registry }}/{{ .name }}:{{ .tag | default $.Chart.AppVersion }}"
          env:
            - name: LOG_LEVEL
              value: {{ $.Values.defaults.logLevel | quote }}
          resources:
            {{- toYaml $.Values.defaults.resources | nindent 12 }}
{{- end }}
`,
		"charts/platform/templates/services.yaml": `{{- range .Values.services }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ .name }}
spec:
  selector:
    app.kubernetes.io/name: {{ .name }}
  ports:
    - port: 80
      targetPort: 8080
{{- end }}
`,
		"charts/platform/templates/configmaps.yaml": `{{- range .Values.services }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .name }}-settings
data:
  service: {{ .name }}
  release: {{ $.Release.Name }}
{{- end }}
`,
	}
	var defaults, prod strings.Builder
	defaults.WriteString("image:\n  registry: ghcr.io/example\ndefaults:\n  replicas: 1\n  logLevel: info\n  resources:\n    requests:\n      cpu: 100m\n      memory: 128Mi\nservices:\n")
	prod.WriteString("# Production pins each service.\nservices:\n")
	for i := range n / 3 {
		fmt.Fprintf(&defaults, "  - name: svc%02d\n", i)
		fmt.Fprintf(&prod, "  - name: svc%02d\n    replicas: %d\n    tag: \"1.%d.0\"\n", i, 2+i, i)
	}
	files["charts/platform/values.yaml"] = defaults.String()
	files["envs/prod/values.yaml"] = prod.String()
	app := Application{Name: "platform-prod", Path: "charts/platform", SourceType: SourceHelm, Namespace: "prod",
		Helm: HelmOptions{ReleaseName: "platform-prod", ValueFiles: []string{"../../envs/prod/values.yaml"}}}
	return testtree.Write(b, files), app
}

// BenchmarkRenderHelm30 renders a chart of 30 objects with one values file.
func BenchmarkRenderHelm30(b *testing.B) {
	repo, app := helmBenchRepo(b, 30)
	b.ReportAllocs()
	for b.Loop() {
		objs, err := Render(context.Background(), repo, app)
		if err != nil || len(objs) != 30 {
			b.Fatalf("render: %d objects, %v", len(objs), err)
		}
	}
	reportHelmCLIRatio(b, repo, app, "render/2-cli-templates")
}

// BenchmarkPlanHelm30 plans a replicas change of one service of a 30-object
// chart: the values key found by rendering, verified.
func BenchmarkPlanHelm30(b *testing.B) {
	repo, app := helmBenchRepo(b, 30)
	req := Request{RepoDir: repo, Apps: []Application{app},
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "svc03"},
		Change: Change{Replicas: &Replicas{Count: 9}}}
	benchPlan(b, req, "")
	reportHelmCLIRatio(b, repo, app, "plan/2-cli-templates")
}

// reportHelmCLIRatio times two "helm template" runs of the app and reports how
// the benchmark's time per op compares to them.
func reportHelmCLIRatio(b *testing.B, repo string, app Application, unit string) {
	bin := os.Getenv("KUKIE_HELM_BIN")
	if bin == "" {
		return
	}
	b.StopTimer()
	chart := filepath.Join(repo, app.Path)
	args := []string{"template", app.Helm.ReleaseName, chart, "--namespace", app.Namespace, "--include-crds"}
	for _, f := range app.Helm.ValueFiles {
		args = append(args, "--values", filepath.Join(chart, f))
	}
	const rounds = 5
	start := time.Now()
	for range rounds * 2 {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			b.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	twoRuns := time.Since(start) / rounds
	b.StartTimer()
	perOp := float64(b.Elapsed()) / float64(b.N)
	b.ReportMetric(perOp/float64(twoRuns), unit)
	b.ReportMetric(float64(twoRuns.Nanoseconds()), "ns/2-cli-templates")
}
