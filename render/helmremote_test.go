package render

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

// A chart from a Helm repository is refused by name where render cannot
// render it as Argo CD does, or where nothing of the repository can hold the
// change.
func TestPlanRefusesWhatAChartFromAHelmRepositoryCannotDo(t *testing.T) {
	charts := goldenCharts(filepath.Join(goldenRoot, "helm-remote-chart-values-key", "repository"))
	chart := func(version string) *ChartDependency {
		return &ChartDependency{Repository: "https://charts.example.com", Name: "redis", Version: version}
	}
	values := map[string]string{"envs/prod/redis.yaml": "replicaCount: 3\n"}
	target := objref.Target{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "redis-redis"}
	scale := Change{Replicas: &Replicas{Count: 5}}
	cases := map[string]struct {
		app     Application
		files   map[string]string
		charts  ChartSource
		code    string
		reasons []string
	}{
		"no values file of the repository": {
			app:     Application{Name: "redis", Path: ".", Helm: HelmOptions{ReleaseName: "redis"}},
			charts:  charts,
			code:    CodeVerificationFailed,
			reasons: []string{"application redis deploys chart redis 18.1.0 from https://charts.example.com and reads no values file of this repository, so nothing here can express"},
		},
		"a value the Application sets, and no manifest of it here": {
			app:     Application{Name: "redis", Path: "envs/prod", Helm: HelmOptions{ReleaseName: "redis", ValueFiles: []string{"/envs/prod/redis.yaml"}, Values: "replicaCount: 3\n", ValuesField: "values"}},
			files:   values,
			charts:  charts,
			code:    CodeAppOverride,
			reasons: []string{"spec.source.helm.values"},
		},
		"a values file of the chart itself": {
			app:     Application{Name: "redis", Path: ".", Helm: HelmOptions{ReleaseName: "redis", ValueFiles: []string{"values-prod.yaml"}}},
			charts:  charts,
			code:    CodeHelm,
			reasons: []string{`the values file "values-prod.yaml", which Argo CD reads from inside chart redis 18.1.0 from https://charts.example.com`},
		},
		"no chart source": {
			app:     Application{Name: "redis", Path: "envs/prod", Helm: HelmOptions{ReleaseName: "redis", ValueFiles: []string{"/envs/prod/redis.yaml"}}},
			files:   values,
			code:    CodeHelmDependency,
			reasons: []string{"deploys chart redis 18.1.0 from https://charts.example.com, and this render fetches no charts"},
		},
		"a version the repository does not have": {
			app:     Application{Name: "redis", Path: "envs/prod", Helm: HelmOptions{ReleaseName: "redis", ValueFiles: []string{"/envs/prod/redis.yaml"}}, Chart: chart("18.2.0")},
			files:   values,
			charts:  charts,
			code:    CodeHelmDependency,
			reasons: []string{"application redis: chart redis 18.2.0 from https://charts.example.com: the repository holds no redis 18.2.0"},
		},
		"a chart whose archive holds an archive that expands past the bound": {
			app:   Application{Name: "redis", Path: "envs/prod", Helm: HelmOptions{ReleaseName: "redis", ValueFiles: []string{"/envs/prod/redis.yaml"}}},
			files: values,
			charts: oneChart(chartArchiveWith(t, "redis", map[string]string{
				"Chart.yaml":           "apiVersion: v2\nname: redis\nversion: 18.1.0\n",
				"charts/pad-0.1.0.tgz": chartArchive(t, "pad", MaxChartArchiveBytes),
			})),
			code:    CodeTooLarge,
			reasons: []string{"redis/charts/pad-0.1.0.tgz in the archive of chart redis 18.1.0 from https://charts.example.com (fetched): the chart archives of the render expand to more than 16777216 bytes"},
		},
		"a chart in a directory of the archive other than its name": {
			// Argo CD renders the directory redis/ of the unpacked archive.
			app:   Application{Name: "redis", Path: "envs/prod", Helm: HelmOptions{ReleaseName: "redis", ValueFiles: []string{"/envs/prod/redis.yaml"}}},
			files: values,
			charts: oneChart(chartArchiveWith(t, "cache", map[string]string{
				"Chart.yaml":         "apiVersion: v2\nname: redis\nversion: 18.1.0\n",
				"templates/sts.yaml": "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: redis-redis\nspec:\n  replicas: {{ .Values.replicaCount | default 1 }}\n",
			})),
			code:    CodeHelmDependency,
			reasons: []string{"application redis: chart redis 18.1.0 from https://charts.example.com: the archive holds its chart in the directory cache/, and Argo CD renders the directory redis/ of it, which it does not have"},
		},
		"no version": {
			app: Application{Name: "redis", Path: "envs/prod", Chart: chart("")}, files: values, charts: charts, code: CodeHelmDependency,
			reasons: []string{"at no version (targetRevision is empty)", "pin an exact version"},
		},
		"a range": {
			app: Application{Name: "redis", Path: "envs/prod", Chart: chart(">=1.0")}, files: values, charts: charts, code: CodeHelmDependency,
			reasons: []string{`at ">=1.0", which is not an exact version`, "anew at every sync"},
		},
		"a major version alone": {
			app: Application{Name: "redis", Path: "envs/prod", Chart: chart("18")}, files: values, charts: charts, code: CodeHelmDependency,
			reasons: []string{`at "18", which is not an exact version`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			app := tc.app
			app.SourceType = SourceHelm
			if app.Chart == nil {
				app.Chart = chart("18.1.0")
			}
			ctx := context.Background()
			if tc.charts != nil {
				ctx = WithCharts(ctx, tc.charts)
			}
			_, err := Plan(ctx, Request{RepoDir: testtree.Write(t, tc.files), Apps: []Application{app}, Target: target, Change: scale})
			var ref *Refusal
			if !errors.As(err, &ref) || ref.Code != tc.code {
				t.Fatalf("Plan: %v, want a %s refusal", err, tc.code)
			}
			t.Log(ref.Reason)
			for _, r := range tc.reasons {
				if !strings.Contains(ref.Reason, r) {
					t.Errorf("reason %q does not say %q", ref.Reason, r)
				}
			}
		})
	}
}

// oneChart is a chart repository that answers every fetch with one archive.
type oneChart string

func (c oneChart) FetchChart(context.Context, ChartDependency) ([]byte, error) {
	return []byte(c), nil
}

// The chart of an app from a Helm repository has its own Chart.lock: checked as
// a repository chart's is, and its files named as the chart's, not as a path.
func TestPlanChecksTheLockOfAChartFromAHelmRepository(t *testing.T) {
	charts := testtree.Write(t, map[string]string{
		"redis-18.1.0/Chart.yaml":        "apiVersion: v2\nname: redis\nversion: 18.1.0\ndependencies:\n- name: common\n  version: 2.0.0\n  repository: https://charts.example.com\n",
		"redis-18.1.0/Chart.lock":        "dependencies:\n- name: common\n  repository: https://charts.example.com\n  version: 2.0.0\ndigest: sha256:0000000000000000000000000000000000000000000000000000000000000000\ngenerated: \"2026-01-01T00:00:00Z\"\n",
		"redis-18.1.0/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: redis}\n",
	})
	app := Application{Name: "redis", Path: "envs/prod", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "redis", ValueFiles: []string{"/envs/prod/redis.yaml"}},
		Chart: &ChartDependency{Repository: "https://charts.example.com", Name: "redis", Version: "18.1.0"}}
	_, err := Plan(WithCharts(context.Background(), goldenCharts(charts)), Request{RepoDir: testtree.Write(t, map[string]string{"envs/prod/redis.yaml": "a: 1\n"}),
		Apps: []Application{app}, Target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "redis"}, Change: Change{Patch: &Patch{Merge: map[string]any{"data": map[string]any{"a": "b"}}}}})
	var ref *Refusal
	want := "chart redis 18.1.0 from https://charts.example.com: the dependency common is not vendored under charts/ and redis 18.1.0 from https://charts.example.com, Chart.lock is out of sync with Chart.yaml"
	if !errors.As(err, &ref) || ref.Code != CodeHelmDependency || !strings.Contains(ref.Reason, want) {
		t.Fatalf("Plan: %v, want a helm_dependency refusal saying %q", err, want)
	}
}

// A chart named with a path in its registry (chart bitnamicharts/redis of
// registry-1.docker.io, pulled as oci://registry-1.docker.io/bitnamicharts/redis)
// is the chart its last path segment names, as Argo CD finds it in the pulled
// archive: its Chart.yaml says redis.
func TestPlanRendersAChartNamedWithAPath(t *testing.T) {
	chartDir := filepath.Join(goldenRoot, "helm-remote-chart-values-key", "repository", "redis-18.1.0")
	charts := t.TempDir()
	if err := os.CopyFS(filepath.Join(charts, "bitnamicharts", "redis-18.1.0"), os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	app := Application{Name: "redis", Path: "envs/prod", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "redis", ValueFiles: []string{"/envs/prod/redis.yaml"}},
		Chart: &ChartDependency{Repository: "oci://registry-1.docker.io", Name: "bitnamicharts/redis", Version: "18.1.0"}}
	res, err := Plan(WithCharts(context.Background(), goldenCharts(charts)), Request{
		RepoDir: testtree.Write(t, map[string]string{"envs/prod/redis.yaml": "replicaCount: 3\n"}),
		Apps:    []Application{app}, Target: objref.Target{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "redis-redis"}, Change: Change{Replicas: &Replicas{Count: 5}}})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if len(res.Edits) != 1 || res.Edits[0].Path != "envs/prod/redis.yaml" || string(res.Edits[0].New) != "replicaCount: 5\n" {
		t.Fatalf("the change edits %+v, want envs/prod/redis.yaml at replicaCount: 5", res.Edits)
	}
}

// A chart whose versions are published with a leading v (cert-manager
// v1.14.4) is pinned by that exact version: Argo CD takes it as one version,
// not a range, and Helm finds it by it.
func TestPlanRendersAChartVersionWithALeadingV(t *testing.T) {
	charts := testtree.Write(t, map[string]string{
		"cert-manager-v1.14.4/Chart.yaml":        "apiVersion: v2\nname: cert-manager\nversion: v1.14.4\n",
		"cert-manager-v1.14.4/values.yaml":       "replicaCount: 1\n",
		"cert-manager-v1.14.4/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cert-manager}\ndata: {replicas: {{ .Values.replicaCount | quote }}}\n",
	})
	app := Application{Name: "cert-manager", Path: "envs/prod", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "cert-manager", ValueFiles: []string{"/envs/prod/cert-manager.yaml"}},
		Chart: &ChartDependency{Repository: "https://charts.jetstack.io", Name: "cert-manager", Version: "v1.14.4"}}
	res, err := Plan(WithCharts(context.Background(), goldenCharts(charts)), Request{
		RepoDir: testtree.Write(t, map[string]string{"envs/prod/cert-manager.yaml": "replicaCount: 2\n"}),
		Apps:    []Application{app}, Target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "cert-manager"},
		Change: Change{Patch: &Patch{Merge: map[string]any{"data": map[string]any{"replicas": "3"}}}}})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if len(res.Edits) != 1 || res.Edits[0].Path != "envs/prod/cert-manager.yaml" || string(res.Edits[0].New) != "replicaCount: 3\n" {
		t.Fatalf("the change edits %+v, want envs/prod/cert-manager.yaml at replicaCount: 3", res.Edits)
	}
}

// The archive fetched for an app's chart holds the version asked as Helm
// matches it (see ChartVersionMatch): v1.2.3 for 1.2.3 and 1.2.3 for
// v1.2.3, as Argo CD deploys them; another version is refused.
func TestPlanChecksTheVersionOfTheFetchedChart(t *testing.T) {
	chartFiles := func(folder, version string) map[string]string {
		return map[string]string{
			folder + "/Chart.yaml":        "apiVersion: v2\nname: cache\nversion: " + version + "\n",
			folder + "/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cache}\ndata: {replicas: {{ .Values.replicas | quote }}}\n",
		}
	}
	cases := map[string]struct {
		asked, holds string
		refusal      string
	}{
		"v1.2.3 holding 1.2.3":     {asked: "v1.2.3", holds: "1.2.3"},
		"1.2.3 holding v1.2.3":     {asked: "1.2.3", holds: "v1.2.3"},
		"1.2.3 holding 1.2.3+1":    {asked: "1.2.3", holds: "1.2.3+1"},
		"1.2.3 holding 1.2.4":      {asked: "1.2.3", holds: "1.2.4", refusal: "application cache: chart cache 1.2.3 from https://charts.example.com: the archive holds cache 1.2.4"},
		"1.2.3 holding 1.2.3-rc.1": {asked: "1.2.3", holds: "1.2.3-rc.1", refusal: "the archive holds cache 1.2.3-rc.1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			charts := testtree.Write(t, chartFiles("cache-"+tc.asked, tc.holds))
			app := Application{Name: "cache", Path: "envs/prod", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "cache", ValueFiles: []string{"/envs/prod/cache.yaml"}},
				Chart: &ChartDependency{Repository: "https://charts.example.com", Name: "cache", Version: tc.asked}}
			res, err := Plan(WithCharts(context.Background(), goldenCharts(charts)), Request{
				RepoDir: testtree.Write(t, map[string]string{"envs/prod/cache.yaml": "replicas: 2\n"}),
				Apps:    []Application{app}, Target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "cache"},
				Change: Change{Patch: &Patch{Merge: map[string]any{"data": map[string]any{"replicas": "3"}}}}})
			if tc.refusal != "" {
				var ref *Refusal
				if !errors.As(err, &ref) || ref.Code != CodeHelmDependency || !strings.Contains(ref.Reason, tc.refusal) {
					t.Fatalf("Plan: %v, want a helm_dependency refusal saying %q", err, tc.refusal)
				}
				return
			}
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			// The values file's replicas is an integer, and stays one.
			if len(res.Edits) != 1 || string(res.Edits[0].New) != "replicas: 3\n" {
				t.Fatalf("the change edits %+v, want envs/prod/cache.yaml at replicas: 3", res.Edits)
			}
		})
	}
}

// An oci:// repoURL is pulled as Argo CD's repo server pulls an OCI artifact:
// the one directory its chart layer holds is the chart, whatever it and the
// chart are named, where a chart of a Helm repository or one named in a
// registry is the directory its name gives (failed before: refused as holding
// web-chart, and as holding the chart in chart/).
func TestRenderTakesTheChartOfAnOCIArtifactWhateverItsName(t *testing.T) {
	archive := chartArchiveWith(t, "chart", map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: web-chart\nversion: 1.0.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
	})
	ctx := WithCharts(context.Background(), oneChart(archive))
	for name, tc := range map[string]struct{ source, refusal string }{
		"an oci:// repoURL of the chart": {source: "{repoURL: oci://registry.example.com/team/web, chart: web, targetRevision: 1.0.0}"},
		"a registry and a chart name": {source: "{repoURL: registry.example.com/team, chart: web, targetRevision: 1.0.0}",
			refusal: "the archive holds web-chart 1.0.0"},
	} {
		t.Run(name, func(t *testing.T) {
			apps := FromArgoCD(decodeArgoCDApp(t, "kind: Application\nmetadata: {name: web}\nspec:\n  source: "+tc.source+"\n"), nil)
			if len(apps) != 1 {
				t.Fatalf("converted %+v, want one app", apps)
			}
			objs, err := Render(ctx, t.TempDir(), apps[0])
			if tc.refusal != "" {
				var ref *Refusal
				if !errors.As(err, &ref) || !strings.Contains(ref.Reason, tc.refusal) {
					t.Fatalf("render: %v, want a refusal saying %q", err, tc.refusal)
				}
				return
			}
			if err != nil || len(objs) != 1 {
				t.Fatalf("render: %v (%d objects), want the ConfigMap", err, len(objs))
			}
		})
	}
}
