package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
)

// helmChartFiles is a chart that shows in ConfigMap "seen" what it was given:
// values, release, capabilities; with a CRD, a hook, a test hook and a List.
func helmChartFiles() map[string]string {
	return map[string]string{
		"chart/Chart.yaml":  "apiVersion: v2\nname: probe\nversion: 0.1.0\n",
		"chart/values.yaml": "a: chart\nb: chart\nc: chart\nd: chart\nport: 1\n",
		"chart/crds/widget.yaml": "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n" +
			"spec:\n  group: example.com\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n  versions: [{name: v1, served: true, storage: true}]\n",
		"chart/templates/seen.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: seen
data:
  a: {{ .Values.a | quote }}
  b: {{ .Values.b | quote }}
  c: {{ .Values.c | quote }}
  d: {{ .Values.d | quote }}
  port: {{ printf "%T" .Values.port | quote }}
  file: {{ .Values.file | default "" | quote }}
  release: {{ .Release.Name | quote }}
  namespace: {{ .Release.Namespace | quote }}
  kube: {{ .Capabilities.KubeVersion.Version | quote }}
  widgets: {{ .Capabilities.APIVersions.Has "example.com/v1" | quote }}
`,
		"chart/templates/hook.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations:\n    helm.sh/hook: pre-install\n",
		"chart/templates/test.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: smoke\n  annotations:\n    helm.sh/hook: test\n",
		"chart/templates/list.yaml": "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ServiceAccount\n  metadata:\n    name: one\n- apiVersion: v1\n  kind: ServiceAccount\n  metadata:\n    name: two\n",
		"chart/values-1.yaml":       "a: one\nb: one\nc: one\n",
		"chart/values-2.yaml":       "a: two\nb: two\n",
		"shared/values.yaml":        "a: shared\n",
		"chart/files/config.txt":    "from a file",
	}
}

func renderKinds(t *testing.T, objs []Object) []string {
	t.Helper()
	var out []string
	for _, o := range objs {
		meta, _ := o.Manifest["metadata"].(map[string]any)
		out = append(out, fmt.Sprintf("%s/%s", o.Manifest["kind"], meta["name"]))
	}
	sort.Strings(out)
	return out
}

func seenData(t *testing.T, objs []Object) map[string]any {
	t.Helper()
	for _, o := range objs {
		if meta, _ := o.Manifest["metadata"].(map[string]any); meta["name"] == "seen" {
			data, _ := o.Manifest["data"].(map[string]any)
			return data
		}
	}
	t.Fatalf("no ConfigMap seen in %v", renderKinds(t, objs))
	return nil
}

func TestHelmRendersAsArgoCDRunsHelmTemplate(t *testing.T) {
	repo := testtree.Write(t, helmChartFiles())
	base := Application{Name: "argocd/probe", Path: "chart", SourceType: SourceHelm, Namespace: "dest", Helm: HelmOptions{ReleaseName: "probe"}}
	cases := map[string]struct {
		helm  func(h *HelmOptions)
		kinds []string
		data  map[string]string
	}{
		"defaults: CRDs and hooks included, the test hook too, Lists flattened": {
			helm: func(*HelmOptions) {},
			kinds: []string{"ConfigMap/seen", "CustomResourceDefinition/widgets.example.com", "Job/migrate", "Pod/smoke",
				"ServiceAccount/one", "ServiceAccount/two"},
			// Helm reads values through JSON: a number is a float64.
			data: map[string]string{"a": "chart", "release": "probe", "namespace": "dest", "port": "float64", "widgets": "false"},
		},
		"skipCrds and skipTests": {
			helm:  func(h *HelmOptions) { h.SkipCrds, h.SkipTests = true, true },
			kinds: []string{"ConfigMap/seen", "Job/migrate", "ServiceAccount/one", "ServiceAccount/two"},
		},
		"values files in order, then values, then parameters, string parameters and file parameters": {
			helm: func(h *HelmOptions) {
				h.ValueFiles = []string{"values-1.yaml", "values-2.yaml", "/shared/values.yaml"}
				h.Values, h.ValuesField = "b: inline\n", "valuesObject"
				h.Parameters = []HelmParameter{{Name: "c", Value: "first"}, {Name: "c", Value: "param"}, {Name: "port", Value: "8080", ForceString: true}}
				h.FileParameters = []HelmFileParameter{{Name: "file", Path: "files/config.txt"}}
			},
			data: map[string]string{"a": "shared", "b": "inline", "c": "param", "d": "chart", "port": "string", "file": "from a file"},
		},
		"a missing values file is skipped with ignoreMissingValueFiles": {
			helm: func(h *HelmOptions) {
				h.ValueFiles, h.IgnoreMissingValueFiles = []string{"values-1.yaml", "values-missing.yaml"}, true
			},
			data: map[string]string{"a": "one"},
		},
		"release name, namespace and capabilities of the Application": {
			helm: func(h *HelmOptions) {
				h.ReleaseName, h.Namespace, h.KubeVersion, h.APIVersions = "other", "elsewhere", "1.31.4", []string{"example.com/v1"}
			},
			data: map[string]string{"release": "other", "namespace": "elsewhere", "kube": "v1.31.4", "widgets": "true"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			app := base
			tc.helm(&app.Helm)
			objs, err := Render(context.Background(), repo, app)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			if tc.kinds != nil {
				if got := renderKinds(t, objs); fmt.Sprint(got) != fmt.Sprint(tc.kinds) {
					t.Fatalf("objects %v, want %v", got, tc.kinds)
				}
			}
			data := seenData(t, objs)
			for k, want := range tc.data {
				if data[k] != want {
					t.Errorf("%s = %v, want %q", k, data[k], want)
				}
			}
		})
	}
}

func TestHelmWithoutDestinationNamespaceRendersInDefault(t *testing.T) {
	repo := testtree.Write(t, helmChartFiles())
	objs, err := Render(context.Background(), repo, Application{Name: "probe", Path: "chart", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "probe"}})
	if err != nil {
		t.Fatal(err)
	}
	if ns := seenData(t, objs)["namespace"]; ns != "default" {
		t.Fatalf("namespace %v, want default (helm's namespace without a kube context)", ns)
	}
}

func TestHelmRendersVendoredSubcharts(t *testing.T) {
	files := map[string]string{
		"chart/Chart.yaml":                       "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n- name: db\n  version: 0.1.0\n  repository: https://charts.example.com\n- name: cache\n  version: 0.2.0\n  repository: https://charts.example.com\n",
		"chart/values.yaml":                      "db:\n  size: 3\ncache:\n  size: 5\n",
		"chart/charts/db/Chart.yaml":             "apiVersion: v2\nname: db\nversion: 0.1.0\n",
		"chart/charts/db/values.yaml":            "size: 1\n",
		"chart/charts/db/templates/sts.yaml":     "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\nspec:\n  replicas: {{ .Values.size }}\n",
		"chart/charts/db/templates/ignored.yaml": "not: rendered\n",
		// A file of a subchart that Helm's loader reads as a file, not as a chart.
		"chart/charts/db/files/seed.tgz": "not: an archive\n",
		// Helm reads the chart directory with the top .helmignore only.
		"chart/.helmignore":            "charts/db/templates/ignored.yaml\n",
		"chart/charts/cache-0.2.0.tgz": chartArchiveWith(t, "cache", map[string]string{"Chart.yaml": "apiVersion: v2\nname: cache\nversion: 0.2.0\n", "templates/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: cache\nspec:\n  replicas: {{ .Values.size }}\n"}),
	}
	repo := testtree.Write(t, files)
	objs, err := Render(context.Background(), repo, Application{Name: "app", Path: "chart", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "app"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, o := range objs {
		meta, _ := o.Manifest["metadata"].(map[string]any)
		spec, _ := o.Manifest["spec"].(map[string]any)
		got[fmt.Sprint(o.Manifest["kind"], "/", meta["name"])] = spec["replicas"]
	}
	if fmt.Sprint(got) != "map[Deployment/cache:5 StatefulSet/db:3]" {
		t.Fatalf("rendered %v, want the two subcharts with the parent's values", got)
	}
}

// A file parameter of a ref source deploying the same tree ($values/...) is
// read from the repository root, as Argo CD reads it from that source's
// checkout, for a chart of the repository and one from a Helm repository
// alike (refused before: as naming a build environment variable, and as read
// from inside the chart).
func TestHelmReadsAFileParameterOfARefSource(t *testing.T) {
	files := helmChartFiles()
	repo := testtree.Write(t, files)
	inChart := map[string]string{}
	for p, data := range files {
		if rest, ok := strings.CutPrefix(p, "chart/"); ok {
			inChart[rest] = data
		}
	}
	ctx := WithCharts(context.Background(), oneChart(chartArchiveWith(t, "probe", inChart)))
	for name, source := range map[string]string{
		"a chart of the repository":      "{repoURL: https://github.com/o/deploy, targetRevision: main, path: chart",
		"a chart from a Helm repository": "{repoURL: https://charts.example.com, chart: probe, targetRevision: 0.1.0",
	} {
		t.Run(name, func(t *testing.T) {
			apps := FromArgoCD(decodeArgoCDApp(t, "kind: Application\nmetadata: {name: probe}\nspec:\n  sources:\n  - "+source+
				", helm: {fileParameters: [{name: file, path: $values/shared/values.yaml}]}}\n"+
				"  - {repoURL: https://github.com/o/deploy, targetRevision: main, ref: values}\n"), nil)
			if len(apps) != 1 {
				t.Fatalf("converted %+v, want one app", apps)
			}
			objs, err := Render(ctx, repo, apps[0])
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			if got := seenData(t, objs)["file"]; got != "a: shared\n" {
				t.Fatalf("file = %q, want the ref source's shared/values.yaml", got)
			}
		})
	}
}

func TestHelmRefusesWhatItDoesNotApplyByName(t *testing.T) {
	repo := testtree.Write(t, helmChartFiles())
	cases := map[string]struct {
		helm       HelmOptions
		code, part string
	}{
		"a missing values file":    {HelmOptions{ValueFiles: []string{"nope.yaml"}}, CodeRenderFailed, `values file chart/nope.yaml ("nope.yaml" of spec.source.helm.valueFiles) does not exist, so Argo CD cannot render the app either: add the file, remove it from valueFiles, or set ignoreMissingValueFiles: true`},
		"a directory values file":  {HelmOptions{ValueFiles: []string{"templates"}}, CodeRenderFailed, `values file chart/templates ("templates" of spec.source.helm.valueFiles) is not a file`},
		"a values file outside":    {HelmOptions{ValueFiles: []string{"../../etc/passwd"}}, CodePathEscape, "it leaves the repository"},
		"a remote values file":     {HelmOptions{ValueFiles: []string{"https://example.com/v.yaml"}}, CodeHelm, `the remote values file "https://example.com/v.yaml"`},
		"a values file glob":       {HelmOptions{ValueFiles: []string{"values-*.yaml"}}, CodeHelm, `the values file glob "values-*.yaml"`},
		"another source's values":  {HelmOptions{ValueFiles: []string{"$values/prod.yaml"}}, CodeHelm, "multi-source Applications are not supported yet"},
		"an environment variable":  {HelmOptions{Parameters: []HelmParameter{{Name: "a", Value: "$ARGOCD_APP_NAME"}}}, CodeHelm, "the parameter a, whose value names a build environment variable"},
		"a file parameter outside": {HelmOptions{FileParameters: []HelmFileParameter{{Name: "f", Path: "../../x"}}}, CodePathEscape, "leaves the repository"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.helm.ReleaseName = "probe"
			_, err := Render(context.Background(), repo, Application{Name: "probe", Path: "chart", SourceType: SourceHelm, Helm: tc.helm})
			var ref *Refusal
			if !errors.As(err, &ref) || ref.Code != tc.code || !strings.Contains(ref.Reason, tc.part) {
				t.Fatalf("got %v, want refused (%s) with %q", err, tc.code, tc.part)
			}
		})
	}
}

// chartArchiveWith is a chart archive (.tgz) of files under the directory name.
func chartArchiveWith(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: name + "/" + p, Mode: 0o644, Size: int64(len(files[p]))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[p])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
