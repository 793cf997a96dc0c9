package render

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/argocd"
)

func decodeArgoCDApp(t *testing.T, manifest string) argocd.Application {
	t.Helper()
	doc, err := sigsyaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	a, err := argocd.DecodeApplication(doc)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestFromArgoCD(t *testing.T) {
	cases := map[string]struct {
		manifest string
		keep     func(argocd.AppSource) bool
		want     []Application
		// unsupported are substrings of each converted app's Unsupported, in order.
		unsupported []string
	}{
		"kustomize with options and status": {
			manifest: `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: web
  namespace: argocd
  annotations:
    argocd.argoproj.io/manifest-generate-paths: .;/bases/web
spec:
  source:
    repoURL: https://github.com/example/deploy.git
    path: overlays/prod
    kustomize:
      namePrefix: prod-
      images: [ghcr.io/example/web:1.2.3]
      replicas: [{name: web, count: 3}, {name: api, count: "2"}]
  destination: {namespace: web}
status:
  sourceType: Kustomize
`,
			want: []Application{{Name: "argocd/web", Path: "overlays/prod", SourceType: SourceKustomize, Namespace: "web",
				ManifestGeneratePaths: ".;/bases/web",
				Kustomize: KustomizeOptions{NamePrefix: "prod-", Images: []string{"ghcr.io/example/web:1.2.3"},
					Replicas: map[string]int64{"web": 3, "api": 2}}}},
		},
		"automated prune": {
			manifest: `
kind: Application
metadata: {name: pruned}
spec:
  source: {repoURL: r, path: a, directory: {}}
  destination: {namespace: a}
  syncPolicy: {automated: {prune: true}}
`,
			want: []Application{{Name: "pruned", Path: "a", SourceType: SourceDirectory, Namespace: "a", Prune: true}},
		},
		"paused automation": {
			manifest: `
kind: Application
metadata: {name: paused}
spec:
  source: {repoURL: r, path: a, directory: {}}
  destination: {namespace: a}
  syncPolicy: {automated: {prune: true, enabled: false}}
`,
			want: []Application{{Name: "paused", Path: "a", SourceType: SourceDirectory, Namespace: "a"}},
		},
		"directory from the explicit block, root path": {
			manifest: `
kind: Application
metadata: {name: plain}
spec:
  source: {repoURL: git@github.com:example/deploy.git, directory: {recurse: true, exclude: "*.json"}}
  destination: {namespace: plain}
`,
			want: []Application{{Name: "plain", Path: ".", SourceType: SourceDirectory, Namespace: "plain", Directory: DirectoryOptions{Recurse: true, Exclude: "*.json"}}},
		},
		"directory without the extension filter": {
			manifest: `
kind: Application
metadata: {name: sealed}
spec:
  source: {repoURL: r, path: s, directory: {disableExtensionFilter: true, include: "{*.yaml,*.yaml.sealed}"}}
  destination: {namespace: s}
`,
			want: []Application{{Name: "sealed", Path: "s", SourceType: SourceDirectory, Namespace: "s", Directory: DirectoryOptions{DisableExtensionFilter: true, Include: "{*.yaml,*.yaml.sealed}"}}},
		},
		"helm, plugin and chart blocks name their type": {
			manifest: `
kind: Application
metadata: {name: m}
spec:
  sources:
  - {repoURL: r, path: h, helm: {valueFiles: [a.yaml]}}
  - {repoURL: r, path: p, plugin: {name: cmp}}
  - {repoURL: https://charts.example, chart: redis, targetRevision: 1.0.0}
`,
			want: []Application{{InSources: true, Name: "m", Path: "h", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "m", ValueFiles: []string{"a.yaml"}}},
				{InSources: true, Name: "m (source 2)", Path: "p", SourceType: SourcePlugin},
				{InSources: true, Name: "m (source 3)", Path: ".", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "m"},
					Chart: &ChartDependency{Repository: "https://charts.example", Name: "redis", Version: "1.0.0"}}},
		},
		"helm options as Argo CD passes them to helm template": {
			manifest: `
kind: Application
metadata: {name: web, namespace: argocd}
spec:
  source:
    repoURL: r
    path: charts/web
    helm:
      namespace: web-system
      valueFiles: [values-prod.yaml, /shared/values.yaml]
      ignoreMissingValueFiles: true
      values: "ignored: true"
      valuesObject: {replicaCount: 3}
      parameters: [{name: image.tag, value: "1.2"}, {name: port, value: "80", forceString: true}]
      fileParameters: [{name: config, path: files/config.txt}]
      skipCrds: true
      skipTests: true
      kubeVersion: "1.31"
      apiVersions: [monitoring.coreos.com/v1]
  destination: {namespace: web}
`,
			want: []Application{{Name: "argocd/web", Path: "charts/web", SourceType: SourceHelm, Namespace: "web", Helm: HelmOptions{
				ReleaseName: "web", Namespace: "web-system", ValueFiles: []string{"values-prod.yaml", "/shared/values.yaml"},
				IgnoreMissingValueFiles: true, Values: "replicaCount: 3\n", ValuesField: "valuesObject", IgnoredValues: true,
				Parameters:     []HelmParameter{{Name: "image.tag", Value: "1.2"}, {Name: "port", Value: "80", ForceString: true}},
				FileParameters: []HelmFileParameter{{Name: "config", Path: "files/config.txt"}},
				SkipCrds:       true, SkipTests: true, KubeVersion: "1.31", APIVersions: []string{"monitoring.coreos.com/v1"}}}},
		},
		"a chart from a Helm repository names its chart, its version and its repository": {
			manifest: `
kind: Application
metadata: {name: redis}
spec:
  source: {repoURL: https://charts.example, chart: redis, targetRevision: 19.0.0, helm: {releaseName: cache}}
`,
			want: []Application{{Name: "redis", Path: ".", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "cache"},
				Chart: &ChartDependency{Repository: "https://charts.example", Name: "redis", Version: "19.0.0"}}},
		},
		"a chart repository without a scheme is an OCI registry, and a range is carried for render to refuse": {
			manifest: `
kind: Application
metadata: {name: redis}
spec:
  source: {repoURL: registry-1.docker.io/bitnamicharts, chart: redis, targetRevision: "18.*"}
`,
			want: []Application{{Name: "redis", Path: ".", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "redis"},
				Chart: &ChartDependency{Repository: "oci://registry-1.docker.io/bitnamicharts", Name: "redis", Version: "18.*"}}},
		},
		"a chart's values file of its own chart is carried for render to refuse": {
			manifest: `
kind: Application
metadata: {name: redis}
spec:
  source: {repoURL: ghcr.io/example/charts, chart: redis, targetRevision: 18.1.0, helm: {valueFiles: [values-prod.yaml]}}
`,
			want: []Application{{Name: "redis", Path: ".", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "redis", ValueFiles: []string{"values-prod.yaml"}},
				Chart: &ChartDependency{Repository: "oci://ghcr.io/example/charts", Name: "redis", Version: "18.1.0"}}},
		},
		"a registry named by its IP address and port, without a scheme, is an OCI registry": {
			manifest: `
kind: Application
metadata: {name: redis}
spec:
  source: {repoURL: "10.0.0.5:5000/charts", chart: redis, targetRevision: 18.1.0}
`,
			want: []Application{{Name: "redis", Path: ".", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "redis"},
				Chart: &ChartDependency{Repository: "oci://10.0.0.5:5000/charts", Name: "redis", Version: "18.1.0"}}},
		},
		"an oci:// repoURL names the chart's own repository, and chart is not joined to it, as Argo CD pulls it": {
			manifest: `
kind: Application
metadata: {name: redis}
spec:
  sources:
  - {repoURL: "oci://10.0.0.5:5000/charts/redis", chart: redis, targetRevision: 18.1.0}
  - {repoURL: oci://ghcr.io/example/charts, chart: redis, targetRevision: 18.1.0}
`,
			want: []Application{
				{InSources: true, Name: "redis", Path: ".", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "redis"},
					Chart: &ChartDependency{Repository: "oci://10.0.0.5:5000/charts", Name: "redis", Version: "18.1.0", Artifact: true}},
				{InSources: true, Name: "redis (source 2)", Path: ".", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "redis"},
					Chart: &ChartDependency{Repository: "oci://ghcr.io/example", Name: "charts", Version: "18.1.0", Artifact: true}}},
		},
		"an oci:// repoURL of a registry alone names no chart": {
			manifest: `
kind: Application
metadata: {name: redis}
spec:
  source: {repoURL: "oci://ghcr.io", chart: redis, targetRevision: 18.1.0}
`,
			want: []Application{{Name: "redis", Path: ".", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "redis"},
				Chart: &ChartDependency{Repository: "oci://ghcr.io", Name: "redis", Version: "18.1.0"}}},
			unsupported: []string{"its repoURL oci://ghcr.io names a registry and no repository in it"},
		},
		"a registry with a port and no scheme is an OCI registry, as Argo CD reads a repoURL without a host": {
			manifest: `
kind: Application
metadata: {name: redis}
spec:
  source: {repoURL: "registry.example.com:5000/charts", chart: redis, targetRevision: 18.1.0}
`,
			want: []Application{{Name: "redis", Path: ".", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "redis"},
				Chart: &ChartDependency{Repository: "oci://registry.example.com:5000/charts", Name: "redis", Version: "18.1.0"}}},
		},
		"a chart's values file from its root is read from inside the chart, as Argo CD reads it, not from the repository": {
			manifest: `
kind: Application
metadata: {name: redis}
spec:
  sources:
  - {repoURL: https://charts.example, chart: redis, targetRevision: 18.1.0, helm: {valueFiles: [/values-prod.yaml, $values/envs/prod/redis.yaml]}}
  - {repoURL: r, ref: values}
`,
			want: []Application{{InSources: true, Name: "redis", Path: "envs/prod", SourceType: SourceHelm, Helm: HelmOptions{ReleaseName: "redis", ValueFiles: []string{"values-prod.yaml", "/envs/prod/redis.yaml"}},
				Chart: &ChartDependency{Repository: "https://charts.example", Name: "redis", Version: "18.1.0"}}},
		},
		"multi-source: the sources keep selects, each with its status type": {
			manifest: `
kind: Application
metadata: {name: m, namespace: argocd}
spec:
  sources: [{repoURL: a, path: p1}, {repoURL: b, path: p2}, {repoURL: a, path: p3}]
status:
  sourceTypes: [Directory, Kustomize, Kustomize]
`,
			keep: func(s argocd.AppSource) bool { return s.RepoURL == "a" },
			want: []Application{{InSources: true, Name: "argocd/m", Path: "p1", SourceType: SourceDirectory},
				{InSources: true, Name: "argocd/m (source 3)", Path: "p3", SourceType: SourceKustomize}},
		},
		"multi-source: values files of a ref source of the same tree resolve from the repository root": {
			manifest: `
kind: Application
metadata: {name: web}
spec:
  sources:
  - {repoURL: https://github.com/o/deploy.git, targetRevision: main, path: charts/web, helm: {valueFiles: [$values/envs/prod.yaml, values.yaml]}}
  - {repoURL: https://github.com/o/deploy, targetRevision: main, ref: values}
`,
			want: []Application{{InSources: true, Name: "web", Path: "charts/web", SourceType: SourceHelm,
				Helm: HelmOptions{ReleaseName: "web", ValueFiles: []string{"/envs/prod.yaml", "values.yaml"}}}},
		},
		"multi-source: a ref source of another repository is not read": {
			manifest: `
kind: Application
metadata: {name: web}
spec:
  sources:
  - {repoURL: https://github.com/o/deploy, targetRevision: main, path: charts/web, helm: {valueFiles: [$cfg/prod.yaml]}}
  - {repoURL: https://github.com/o/config, targetRevision: v2, ref: cfg}
`,
			want: []Application{{InSources: true, Name: "web", Path: "charts/web", SourceType: SourceHelm,
				Helm: HelmOptions{ReleaseName: "web", ValueFiles: []string{"$cfg/prod.yaml"}}}},
			unsupported: []string{"its values file $cfg/prod.yaml comes from https://github.com/o/config at v2"},
		},
		"multi-source: a chart from a Helm repository with values of the changed tree reads them from there": {
			manifest: `
kind: Application
metadata: {name: redis}
spec:
  sources:
  - {repoURL: https://charts.example, chart: redis, targetRevision: 19.0.0, helm: {valueFiles: [$values/envs/redis/prod.yaml]}}
  - {repoURL: deploy, targetRevision: main, ref: values}
`,
			keep: func(s argocd.AppSource) bool { return s.RepoURL == "deploy" },
			want: []Application{{InSources: true, Name: "redis", Path: "envs/redis", SourceType: SourceHelm,
				Helm:  HelmOptions{ReleaseName: "redis", ValueFiles: []string{"/envs/redis/prod.yaml"}},
				Chart: &ChartDependency{Repository: "https://charts.example", Name: "redis", Version: "19.0.0"}}},
		},
		"multi-source read on its own: a chart from a Helm repository with values of the one Git repository reaches their directory": {
			manifest: `
kind: Application
metadata: {name: redis}
spec:
  sources:
  - {repoURL: https://charts.example, chart: redis, targetRevision: 19.0.0, helm: {valueFiles: [$values/envs/redis/prod.yaml]}}
  - {repoURL: https://github.com/o/deploy.git, targetRevision: main, ref: values}
`,
			want: []Application{{InSources: true, Name: "redis", Path: "envs/redis", SourceType: SourceHelm,
				Helm:  HelmOptions{ReleaseName: "redis", ValueFiles: []string{"/envs/redis/prod.yaml"}},
				Chart: &ChartDependency{Repository: "https://charts.example", Name: "redis", Version: "19.0.0"}}},
		},
		"multi-source read on its own: a chart's values from two Git repositories are not known to be the changed one's": {
			manifest: `
kind: Application
metadata: {name: redis}
spec:
  sources:
  - {repoURL: https://charts.example, chart: redis, targetRevision: 19.0.0, helm: {valueFiles: [$values/envs/redis/prod.yaml, $cfg/redis.yaml]}}
  - {repoURL: https://github.com/o/deploy.git, targetRevision: main, ref: values}
  - {repoURL: https://github.com/o/config.git, targetRevision: main, ref: cfg}
`,
			want: []Application{{InSources: true, Name: "redis", Path: ".", SourceType: SourceHelm,
				Helm:  HelmOptions{ReleaseName: "redis", ValueFiles: []string{"$values/envs/redis/prod.yaml", "$cfg/redis.yaml"}},
				Chart: &ChartDependency{Repository: "https://charts.example", Name: "redis", Version: "19.0.0"}}},
			unsupported: []string{"its values file $values/envs/redis/prod.yaml comes from https://github.com/o/deploy.git at main, which is not the repository and revision being changed; its values file $cfg/redis.yaml comes from"},
		},
		"multi-source: file parameters of a ref source of the same tree resolve from the repository root, as values files do": {
			manifest: `
kind: Application
metadata: {name: web}
spec:
  sources:
  - {repoURL: https://github.com/o/deploy.git, targetRevision: main, path: charts/web, helm: {fileParameters: [{name: tls.key, path: $values/certs/tls.key}, {name: config, path: config.json}]}}
  - {repoURL: https://github.com/o/deploy, targetRevision: main, ref: values}
`,
			want: []Application{{InSources: true, Name: "web", Path: "charts/web", SourceType: SourceHelm,
				Helm: HelmOptions{ReleaseName: "web", FileParameters: []HelmFileParameter{{Name: "tls.key", Path: "/certs/tls.key"}, {Name: "config", Path: "config.json"}}}}},
		},
		"multi-source: a chart from a Helm repository reading a file parameter of the changed tree reads it from there": {
			manifest: `
kind: Application
metadata: {name: redis}
spec:
  sources:
  - {repoURL: https://charts.example, chart: redis, targetRevision: 19.0.0, helm: {fileParameters: [{name: tls.key, path: $values/certs/redis.key}, {name: config, path: /files/config.json}]}}
  - {repoURL: deploy, targetRevision: main, ref: values}
`,
			keep: func(s argocd.AppSource) bool { return s.RepoURL == "deploy" },
			want: []Application{{InSources: true, Name: "redis", Path: "certs", SourceType: SourceHelm,
				Helm:  HelmOptions{ReleaseName: "redis", FileParameters: []HelmFileParameter{{Name: "tls.key", Path: "/certs/redis.key"}, {Name: "config", Path: "files/config.json"}}},
				Chart: &ChartDependency{Repository: "https://charts.example", Name: "redis", Version: "19.0.0"}}},
		},
		"multi-source: a file parameter of a ref source of another repository is not read": {
			manifest: `
kind: Application
metadata: {name: web}
spec:
  sources:
  - {repoURL: https://github.com/o/deploy, targetRevision: main, path: charts/web, helm: {fileParameters: [{name: tls.key, path: $cfg/tls.key}]}}
  - {repoURL: https://github.com/o/config, targetRevision: v2, ref: cfg}
`,
			want: []Application{{InSources: true, Name: "web", Path: "charts/web", SourceType: SourceHelm,
				Helm: HelmOptions{ReleaseName: "web", FileParameters: []HelmFileParameter{{Name: "tls.key", Path: "$cfg/tls.key"}}}}},
			unsupported: []string{"its file parameter tls.key ($cfg/tls.key) comes from https://github.com/o/config at v2"},
		},
		"kustomize options render does not apply": {
			manifest: `
kind: Application
metadata: {name: k}
spec:
  source:
    repoURL: r
    path: k
    kustomize: {namePrefix: a-, patches: [{patch: x, target: {kind: Deployment}}, {path: p.yaml}], laterOption: true, version: v5.0.0}
`,
			want: []Application{{Name: "k", Path: "k", SourceType: SourceKustomize, Kustomize: KustomizeOptions{NamePrefix: "a-",
				Patches: []map[string]any{{"patch": "x", "target": map[string]any{"kind": "Deployment"}}}}}},
			unsupported: []string{"reads the file p.yaml; only inline patches are supported; it sets spec.source.kustomize options that are not supported yet (laterOption)"},
		},
		"multi-source: kustomize options render does not apply are named in spec.sources": {
			manifest: `
kind: Application
metadata: {name: k}
spec:
  sources:
  - {repoURL: r, path: k, kustomize: {patches: [{path: p.yaml}], laterOption: true, replicas: [{name: web, count: many}]}}
`,
			want: []Application{{InSources: true, Name: "k", Path: "k", SourceType: SourceKustomize}},
			unsupported: []string{`its spec.sources[0].kustomize.patches entry reads the file p.yaml; only inline patches are supported; ` +
				`it sets spec.sources[0].kustomize options that are not supported yet (laterOption); ` +
				`Argo CD applies them when it renders, so no change it renders can be verified as Argo CD will deploy it; ` +
				`its spec.sources[0].kustomize.replicas count "many" for web is not an integer`},
		},
		"spec.source beside spec.sources is ignored, as Argo CD ignores it": {
			manifest: `
kind: Application
metadata: {name: web}
spec:
  source: {repoURL: r, path: old, kustomize: {namePrefix: old-}}
  sources:
  - {repoURL: r, path: apps/web, kustomize: {namePrefix: new-}}
`,
			want: []Application{{InSources: true, Name: "web", Path: "apps/web", SourceType: SourceKustomize, Kustomize: KustomizeOptions{NamePrefix: "new-"}}},
		},
		"replicas count that is not an integer": {
			manifest: `
kind: Application
metadata: {name: k}
spec:
  source: {repoURL: r, path: k, kustomize: {replicas: [{name: web, count: many}, {name: api, count: 2}]}}
status: {sourceType: Kustomize}
`,
			want:        []Application{{Name: "k", Path: "k", SourceType: SourceKustomize, Kustomize: KustomizeOptions{Replicas: map[string]int64{"api": 2}}}},
			unsupported: []string{`count "many" for web is not an integer`},
		},
		"no source": {
			manifest: "kind: Application\nmetadata: {name: e}\nspec: {destination: {namespace: x}}\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := FromArgoCD(decodeArgoCDApp(t, tc.manifest), tc.keep)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d applications %+v, want %d", len(got), got, len(tc.want))
			}
			for i := range got {
				want := ""
				if i < len(tc.unsupported) {
					want = tc.unsupported[i]
				}
				if (want == "") != (got[i].Unsupported == "") || !strings.Contains(got[i].Unsupported, want) {
					t.Errorf("app %d: Unsupported %q, want it to say %q", i, got[i].Unsupported, want)
				}
				got[i].Unsupported = ""
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// argocd-cm's build options reach every Kustomize app; options render cannot
// apply, and a kustomize version argocd-cm does not register, mark it.
func TestFromArgoCDTakesArgoCDSettings(t *testing.T) {
	manifest := "kind: Application\nmetadata: {name: k}\nspec:\n  source: {repoURL: r, path: k, kustomize: {version: %s}}\nstatus: {sourceType: Kustomize}\n"
	cases := map[string]struct {
		version, options, unsupported string
	}{
		"options applied":            {version: `""`, options: "--load-restrictor LoadRestrictionsNone"},
		"a registered version":       {version: "v5.4.3", options: "--reorder none"},
		"options render cannot take": {version: `""`, options: "--enable-alpha-plugins", unsupported: "sets --enable-alpha-plugins"},
		"a version not registered":   {version: "v4.5.7", unsupported: "version v4.5.7 is not registered in argocd-cm"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := decodeArgoCDApp(t, fmt.Sprintf(manifest, tc.version))
			a.Settings = &argocd.Settings{KustomizeBuildOptions: tc.options, KustomizeVersions: []string{"v5.4.3"}}
			got := FromArgoCD(a, nil)
			if len(got) != 1 || got[0].Kustomize.BuildOptions != tc.options {
				t.Fatalf("got %+v, want one app with build options %q", got, tc.options)
			}
			if u := got[0].Unsupported; (tc.unsupported == "") != (u == "") || !strings.Contains(u, tc.unsupported) {
				t.Fatalf("Unsupported %q, want it to say %q", u, tc.unsupported)
			}
		})
	}
}

// The build environment is Argo CD's: the tracked name (namespace_name outside the
// controller's namespace), the destination, project and source, and the revision
// of the commit rendered; apps that substitute nothing carry none.
func TestFromArgoCDBuildEnvironment(t *testing.T) {
	a := decodeArgoCDApp(t, `
kind: Application
metadata: {name: web, namespace: team-a}
spec:
  project: shop
  destination: {namespace: web}
  source: {repoURL: https://github.com/acme/deploy.git, path: apps/web, targetRevision: main, kustomize: {images: ["web=web:${ARGOCD_APP_REVISION_SHORT}"]}}
status: {sourceType: Kustomize, controllerNamespace: argocd}
`)
	plain := decodeArgoCDApp(t, "kind: Application\nmetadata: {name: api}\nspec:\n  source: {repoURL: r, path: api, kustomize: {images: [api=api:2]}}\nstatus: {sourceType: Kustomize}\n")
	apps := append(FromArgoCD(a, nil), FromArgoCD(plain, nil)...)
	WithRevision(apps, "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567")
	want := map[string]string{
		"ARGOCD_APP_NAME": "team-a_web", "ARGOCD_APP_NAMESPACE": "web", "ARGOCD_APP_PROJECT_NAME": "shop",
		"ARGOCD_APP_SOURCE_REPO_URL": "https://github.com/acme/deploy.git", "ARGOCD_APP_SOURCE_PATH": "apps/web",
		"ARGOCD_APP_SOURCE_TARGET_REVISION": "main", "ARGOCD_APP_REVISION": "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567",
		"ARGOCD_APP_REVISION_SHORT": "0a1b2c3", "ARGOCD_APP_REVISION_SHORT_8": "0a1b2c3d",
	}
	if !reflect.DeepEqual(apps[0].Kustomize.Env, want) {
		t.Fatalf("env = %v\nwant %v", apps[0].Kustomize.Env, want)
	}
	if apps[1].Kustomize.Env != nil {
		t.Fatalf("an app that substitutes nothing has env %v", apps[1].Kustomize.Env)
	}
}

// FromArgoCD leaves the Application it converts as it was: the service asks it
// afterwards where a change goes (PrimarySource reads its "$values/..." files).
func TestFromArgoCDLeavesTheApplicationAsItWas(t *testing.T) {
	a := argocd.Application{Name: "redis", Spec: argocd.AppSpec{Sources: []argocd.AppSource{
		{RepoURL: "https://charts.example.com", Chart: "redis", TargetRevision: "18.1.0", Helm: &argocd.AppSourceHelm{ValueFiles: []string{"/values-prod.yaml", "$values/envs/prod/redis.yaml"}}},
		{RepoURL: "https://github.com/o/deploy", TargetRevision: "main", Ref: "values"},
	}}}
	FromArgoCD(a, nil)
	if got := a.Spec.Sources[0].Helm.ValueFiles; !slices.Equal(got, []string{"/values-prod.yaml", "$values/envs/prod/redis.yaml"}) {
		t.Fatalf("the Application's valueFiles are now %q", got)
	}
	if src, _ := a.PrimarySource(); src.RepoURL != "https://github.com/o/deploy" || src.Path != "envs/prod" {
		t.Fatalf("PrimarySource after FromArgoCD = %+v, want the ref source at envs/prod", src)
	}
}
