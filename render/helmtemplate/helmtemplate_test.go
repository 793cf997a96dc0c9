package helmtemplate

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	ci "helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
)

const chartYAML = "apiVersion: v2\nname: shop\nversion: 1.2.3\nappVersion: \"4.5\"\n"

// app is a chart that uses each part of a render: helpers, values, release and
// chart fields, capabilities, lookup, hooks with weights and a test, NOTES, a
// CRD, several kinds in one file (sorted into install order) and an empty
// template.
var app = map[string]string{
	"Chart.yaml":  chartYAML,
	"values.yaml": "replicas: 2\nimage: ghcr.io/example/shop:1.0\nextra: {}\n",
	"templates/_helpers.tpl": `{{- define "shop.labels" -}}
app: {{ .Chart.Name }}
release: {{ .Release.Name }}
{{- end -}}`,
	"templates/app.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
  labels: {{- include "shop.labels" . | nindent 4 }}
spec:
  replicas: {{ .Values.replicas }}
  template:
    spec:
      containers:
        - name: app
          image: {{ .Values.image }}
          env:
            - name: KUBE
              value: {{ .Capabilities.KubeVersion.Version | quote }}
            - name: HAS_PROBES
              value: {{ .Capabilities.APIVersions.Has "monitoring.coreos.com/v1/Probe" | quote }}
            - name: LOOKUP
              value: {{ lookup "v1" "ConfigMap" "default" "x" | toJson | quote }}
            - name: INSTALL
              value: {{ .Release.IsInstall | quote }}
            - name: REVISION
              value: {{ .Release.Revision | quote }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .Release.Name }}
---
apiVersion: v1
kind: Namespace
metadata:
  name: {{ .Release.Namespace }}-extra
`,
	"templates/empty.yaml": "{{- if .Values.never }}\nkind: ConfigMap\n{{- end }}\n",
	"templates/hooks.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-weight: "5"
    helm.sh/hook-delete-policy: before-hook-creation
---
apiVersion: batch/v1
kind: Job
metadata:
  name: seed
  annotations:
    helm.sh/hook: post-install
    helm.sh/hook-weight: "-1"
`,
	"templates/tests/test.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: check\n  annotations:\n    helm.sh/hook: test\n",
	"templates/NOTES.txt":       "Installed {{ .Release.Name }} in {{ .Release.Namespace }}.\n",
	"crds/widget.yaml":          "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n",
}

// withDependency adds subcharts: one enabled by a condition, with notes of its
// own (not the release's), one disabled, one imported under an alias twice.
func withDependency() map[string]string {
	files := map[string]string{
		"Chart.yaml": chartYAML + `dependencies:
  - name: cache
    version: 0.1.0
    condition: cache.enabled
  - name: queue
    version: 0.1.0
    condition: queue.enabled
  - name: worker
    version: 0.1.0
    alias: worker-a
  - name: worker
    version: 0.1.0
    alias: worker-b
`,
		"values.yaml":                              "cache:\n  enabled: true\n  size: 3\nqueue:\n  enabled: false\nworker-b:\n  threads: 8\n",
		"templates/cm.yaml":                        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: top\ndata:\n  size: {{ .Values.cache.size | quote }}\n",
		"charts/cache/Chart.yaml":                  "apiVersion: v2\nname: cache\nversion: 0.1.0\n",
		"charts/cache/values.yaml":                 "size: 1\n",
		"charts/cache/templates/sts.yaml":          "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: {{ .Release.Name }}-cache\nspec:\n  replicas: {{ .Values.size }}\n",
		"charts/cache/templates/NOTES.txt":         "cache notes\n",
		"charts/queue/Chart.yaml":                  "apiVersion: v2\nname: queue\nversion: 0.1.0\n",
		"charts/queue/templates/q.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: queue\n",
		"charts/worker/Chart.yaml":                 "apiVersion: v2\nname: worker\nversion: 0.1.0\n",
		"charts/worker/values.yaml":                "threads: 1\n",
		"charts/worker/templates/deployment.yaml":  "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Chart.Name }}\ndata:\n  threads: {{ .Values.threads | quote }}\n",
		"charts/worker/templates/service.yaml":     "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Chart.Name }}\n",
		"charts/worker/templates/tests/probe.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Chart.Name }}-probe\n  annotations:\n    helm.sh/hook: test\n",
	}
	return files
}

func with(base map[string]string, changes map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range changes {
		out[k] = v
	}
	return out
}

func load(t *testing.T, files map[string]string) *chart.Chart {
	t.Helper()
	var bf []*archive.BufferedFile
	for name, data := range files {
		bf = append(bf, &archive.BufferedFile{Name: name, Data: []byte(data)})
	}
	sort.Slice(bf, func(i, j int) bool { return bf[i].Name < bf[j].Name })
	ch, err := loader.LoadFiles(bf)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return ch
}

// install is the reference: Helm's own install in client-only dry-run mode,
// as "helm template" runs it.
func install(ch *chart.Chart, vals map[string]any, o Options) (*release.Release, error) {
	cfg := action.NewConfiguration()
	cfg.CustomTemplateFuncs = o.TemplateFuncs
	inst := action.NewInstall(cfg)
	inst.DryRunStrategy = action.DryRunClient
	inst.Replace = true
	inst.ReleaseName = o.ReleaseName
	inst.Namespace = o.Namespace
	inst.IncludeCRDs = o.IncludeCRDs
	inst.SkipSchemaValidation = o.SkipSchemaValidation
	inst.KubeVersion = o.KubeVersion
	inst.APIVersions = o.APIVersions
	rel, err := inst.RunWithContext(context.Background(), ch, vals)
	if rel == nil {
		return nil, err
	}
	r, ok := rel.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("release of type %T", rel)
	}
	return r, err
}

// TestRenderIsHelmTemplate holds Render equal to Helm's install dry run for the
// same chart, values and options: the manifest, the hooks, the notes and the
// error, for a render that succeeds and for each way one fails.
func TestRenderIsHelmTemplate(t *testing.T) {
	kube, err := common.ParseKubeVersion("v1.31.4")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{ReleaseName: "shop", Namespace: "web"}
	for name, tc := range map[string]struct {
		files  map[string]string
		vals   map[string]any
		opts   Options
		failed bool
	}{
		"defaults":              {files: app, opts: opts},
		"values and CRDs":       {files: app, vals: map[string]any{"replicas": 5, "extra": map[string]any{"a": 1}}, opts: Options{ReleaseName: "shop", Namespace: "web", IncludeCRDs: true}},
		"capabilities":          {files: app, opts: Options{ReleaseName: "shop", Namespace: "web", KubeVersion: kube, APIVersions: common.VersionSet{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/Probe"}}},
		"dependencies":          {files: withDependency(), opts: opts},
		"dependency values":     {files: withDependency(), vals: map[string]any{"cache": map[string]any{"enabled": false}, "queue": map[string]any{"enabled": true}}, opts: opts},
		"template functions":    {files: with(app, map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r\ndata:\n  r: {{ repeat 3 \"ab\" | quote }}\n"}), opts: Options{ReleaseName: "shop", Namespace: "web", TemplateFuncs: map[string]any{"repeat": func(n int, s string) string { return fmt.Sprint(n, s) }}}},
		"schema skipped":        {files: with(app, map[string]string{"values.schema.json": `{"type":"object","properties":{"replicas":{"type":"string"}}}`}), opts: Options{ReleaseName: "shop", Namespace: "web", SkipSchemaValidation: true}},
		"schema violated":       {files: with(app, map[string]string{"values.schema.json": `{"type":"object","properties":{"replicas":{"type":"string"}}}`}), opts: opts, failed: true},
		"bad release name":      {files: app, opts: Options{ReleaseName: "Shop_1", Namespace: "web"}, failed: true},
		"kube version refused":  {files: with(app, map[string]string{"Chart.yaml": chartYAML + "kubeVersion: \">=1.40.0\"\n"}), opts: opts, failed: true},
		"template fails":        {files: with(app, map[string]string{"templates/fail.yaml": `{{ fail "no database configured" }}`}), opts: opts, failed: true},
		"output does not parse": {files: with(app, map[string]string{"templates/bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n"}), opts: opts, failed: true},
		"dependency missing":    {files: with(withDependency(), map[string]string{"charts/cache/Chart.yaml": "apiVersion: v2\nname: other\nversion: 0.1.0\n"}), opts: opts},
	} {
		t.Run(name, func(t *testing.T) {
			want, wantErr := install(load(t, tc.files), tc.vals, tc.opts)
			got, gotErr := Render(context.Background(), load(t, tc.files), tc.vals, tc.opts)
			if (wantErr != nil) != tc.failed {
				t.Fatalf("the reference install failed = %v (%v), want %v: the case does not test what it says", wantErr != nil, wantErr, tc.failed)
			}
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("error:\n%v\nwant:\n%v", gotErr, wantErr)
			}
			if (got == nil) != (want == nil) {
				t.Fatalf("release = %v, want %v", got, want)
			}
			if want == nil {
				return
			}
			if gm, wm := sources(got.Manifest, gotErr), sources(want.Manifest, wantErr); !reflect.DeepEqual(gm, wm) {
				t.Errorf("manifest:\n%s\nwant:\n%s", got.Manifest, want.Manifest)
			}
			if !reflect.DeepEqual(got.Hooks, want.Hooks) {
				t.Errorf("hooks:\n%s\nwant:\n%s", hookList(got.Hooks), hookList(want.Hooks))
			}
			if got.Info.Notes != want.Info.Notes {
				t.Errorf("notes %q, want %q", got.Info.Notes, want.Info.Notes)
			}
			if got.Info.Status != want.Info.Status || got.Name != want.Name || got.Namespace != want.Namespace || got.Version != want.Version {
				t.Errorf("release %s/%s v%d %s, want %s/%s v%d %s", got.Namespace, got.Name, got.Version, got.Info.Status, want.Namespace, want.Name, want.Version, want.Info.Status)
			}
		})
	}
}

// sources splits a manifest into its files. A manifest that does not parse is
// every file in the order of a map's iteration, in Helm as here: only the set
// of files is the same.
func sources(manifest string, err error) []string {
	files := strings.Split(manifest, "---\n# Source: ")
	if err != nil {
		sort.Strings(files)
	}
	return files
}

func hookList(hooks []*release.Hook) string {
	var b strings.Builder
	for _, h := range hooks {
		fmt.Fprintf(&b, "%s %s/%s events %v weight %d policies %v\n%s\n", h.Path, h.Kind, h.Name, h.Events, h.Weight, h.DeletePolicies, h.Manifest)
	}
	return b.String()
}

// TestCheckDependencies holds CheckDependencies to Helm's check of the same
// chart: all present, one missing, two missing (in Chart.yaml's order), and a
// dependency present under another name.
func TestCheckDependencies(t *testing.T) {
	for name, tc := range map[string]struct {
		files  map[string]string
		failed bool
	}{
		"present":         {files: withDependency()},
		"one missing":     {files: with(withDependency(), map[string]string{"charts/queue/Chart.yaml": "apiVersion: v2\nname: other\nversion: 0.1.0\n"}), failed: true},
		"two missing":     {files: with(withDependency(), map[string]string{"charts/queue/Chart.yaml": "apiVersion: v2\nname: other\nversion: 0.1.0\n", "charts/cache/Chart.yaml": "apiVersion: v2\nname: more\nversion: 0.1.0\n"}), failed: true},
		"aliased twice":   {files: with(withDependency(), map[string]string{"charts/worker/Chart.yaml": "apiVersion: v2\nname: workers\nversion: 0.1.0\n"}), failed: true},
		"no subcharts":    {files: map[string]string{"Chart.yaml": chartYAML + "dependencies:\n  - name: cache\n    version: 0.1.0\n"}, failed: true},
		"no dependencies": {files: app},
	} {
		t.Run(name, func(t *testing.T) {
			ch := load(t, tc.files)
			var reqs []ci.Dependency
			for _, d := range ch.Metadata.Dependencies {
				reqs = append(reqs, d)
			}
			want := action.CheckDependencies(ch, reqs)
			if (want != nil) != tc.failed {
				t.Fatalf("Helm's check failed = %v (%v), want %v", want != nil, want, tc.failed)
			}
			if got := CheckDependencies(ch); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("CheckDependencies = %v, want %v", got, want)
			}
		})
	}
}
