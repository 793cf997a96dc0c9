package argocd

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseApplication(t *testing.T) {
	tests := map[string]struct {
		obj     map[string]any
		wantErr string
	}{
		"minimal": {
			obj: map[string]any{"metadata": map[string]any{"name": "shop", "namespace": "argocd"}},
		},
		"no name": {
			obj:     map[string]any{"metadata": map[string]any{"namespace": "argocd"}},
			wantErr: "metadata.name is empty",
		},
		"wrong type": {
			obj: map[string]any{
				"metadata": map[string]any{"name": "shop", "namespace": "argocd"},
				"spec":     map[string]any{"syncPolicy": map[string]any{"automated": "yes"}},
			},
			wantErr: "decode application argocd/shop",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseApplication(tc.obj)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestApplicationLevel(t *testing.T) {
	no, yes := false, true
	tests := map[string]struct {
		policy *AppSyncPolicy
		want   Level
	}{
		"no policy":           {policy: nil, want: LevelManual},
		"sync options only":   {policy: &AppSyncPolicy{SyncOptions: []string{"CreateNamespace=true"}}, want: LevelManual},
		"automated":           {policy: &AppSyncPolicy{Automated: &AppSyncAutomated{Prune: true}}, want: LevelAuto},
		"self-heal":           {policy: &AppSyncPolicy{Automated: &AppSyncAutomated{SelfHeal: true}}, want: LevelSelfHeal},
		"automation disabled": {policy: &AppSyncPolicy{Automated: &AppSyncAutomated{SelfHeal: true, Enabled: &no}}, want: LevelManual},
		"automation enabled":  {policy: &AppSyncPolicy{Automated: &AppSyncAutomated{SelfHeal: true, Enabled: &yes}}, want: LevelSelfHeal},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := Application{Spec: AppSpec{SyncPolicy: tc.policy}}
			if got := a.Level(); got != tc.want {
				t.Errorf("Level() = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestMultiSourceApplicationWarns(t *testing.T) {
	app := Application{Name: "multi", Namespace: "argocd", Spec: AppSpec{Sources: []AppSource{
		{RepoURL: "https://github.com/o/charts", Chart: "web"},
		{RepoURL: "https://github.com/o/values", Ref: "values"},
	}}, Status: AppStatus{Resources: []AppResourceStatus{{Kind: "ConfigMap", Namespace: "x", Name: "c"}}}}
	o := Own(Resource{Ref: ResourceRef{Kind: "ConfigMap", Namespace: "x", Name: "c"},
		Annotations: map[string]string{TrackingIDAnnotation: "multi:/ConfigMap:x/c"}}, NewAppIndex([]Application{app}), Options{ControlPlaneNamespace: "argocd"})
	if !o.Managed || !strings.Contains(strings.Join(o.Warnings, " "), "2 sources") {
		t.Fatalf("Own = %+v", o)
	}
	if src, ok := app.PrimarySource(); !ok || src.Chart != "web" {
		t.Errorf("PrimarySource = %+v, %v", src, ok)
	}
}

func TestDecodeApplicationList(t *testing.T) {
	tests := map[string]struct {
		data         string
		wantNames    []string
		wantContinue string
		wantInvalid  int
		wantErr      bool
	}{
		"page with continue token": {
			data:         `{"kind":"ApplicationList","metadata":{"continue":"abc"},"items":[{"metadata":{"name":"a","namespace":"argocd"}},{"metadata":{"name":"b","namespace":"argocd"}}]}`,
			wantNames:    []string{"a", "b"},
			wantContinue: "abc",
		},
		"a bad item does not hide the others": {
			data:        `{"metadata":{},"items":[{"metadata":{"name":"a","namespace":"argocd"},"spec":{"syncPolicy":{"automated":"yes"}}},{"metadata":{"name":"b","namespace":"argocd"}},{"metadata":{"namespace":"argocd"}}]}`,
			wantNames:   []string{"b"},
			wantInvalid: 2,
		},
		"empty list": {data: `{"metadata":{},"items":[]}`},
		"not json":   {data: `404 page not found`, wantErr: true},
		"not a list": {data: `{"items":{}}`, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			apps, next, invalid, err := DecodeApplicationList([]byte(tc.data))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			var names []string
			for _, a := range apps {
				names = append(names, a.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.wantNames, ",") || next != tc.wantContinue || len(invalid) != tc.wantInvalid {
				t.Errorf("got %v, continue %q, invalid %v", names, next, invalid)
			}
		})
	}
	if _, _, invalid, _ := DecodeApplicationList([]byte(tests["a bad item does not hide the others"].data)); !strings.Contains(invalid[0].Error(), "argocd/a") {
		t.Errorf("invalid item not named: %v", invalid[0])
	}
}

func TestApplicationSourceOptionsAndGeneratePaths(t *testing.T) {
	const doc = `{
	  "metadata": {"name": "api", "namespace": "argocd", "annotations": {
	    "argocd.argoproj.io/manifest-generate-paths": ".;/shared",
	    "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
	  "spec": {"source": {"repoURL": "https://github.com/acme/deploy", "path": "apps/api",
	    "kustomize": {"namePrefix": "prod-", "nameSuffix": "-x", "namespace": "shop",
	      "commonLabels": {"team": "shop"}, "commonAnnotations": {"owner": "shop"},
	      "images": ["registry.example/api:1.4.2"], "components": ["../components/tls"],
	      "replicas": [{"name": "api", "count": 3}, {"name": "worker", "count": "2"}]},
	    "directory": {"recurse": true, "include": "{a,b}/*.yaml", "exclude": "*-test.yaml"}}}
	}`
	var obj map[string]any
	if err := json.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatal(err)
	}
	decoders := map[string]func() (Application, error){
		"json":         func() (Application, error) { return DecodeApplication([]byte(doc)) },
		"unstructured": func() (Application, error) { return ParseApplication(obj) },
	}
	for name, decode := range decoders {
		t.Run(name, func(t *testing.T) {
			a, err := decode()
			if err != nil {
				t.Fatal(err)
			}
			if a.ManifestGeneratePaths != ".;/shared" {
				t.Errorf("generate paths %q", a.ManifestGeneratePaths)
			}
			k := a.Spec.Source.Kustomize
			if k == nil || k.NamePrefix != "prod-" || k.NameSuffix != "-x" || k.Namespace != "shop" ||
				k.CommonLabels["team"] != "shop" || k.CommonAnnotations["owner"] != "shop" ||
				len(k.Images) != 1 || k.Images[0] != "registry.example/api:1.4.2" || len(k.Components) != 1 {
				t.Fatalf("kustomize options %+v", k)
			}
			if len(k.Replicas) != 2 || k.Replicas[0].Count.IntValue() != 3 || k.Replicas[1].Count.IntValue() != 2 {
				t.Fatalf("replicas %+v", k.Replicas)
			}
			d := a.Spec.Source.Directory
			if d == nil || !d.Recurse || d.Include != "{a,b}/*.yaml" || d.Exclude != "*-test.yaml" {
				t.Fatalf("directory options %+v", d)
			}
		})
	}
}

func TestDeploysBranch(t *testing.T) {
	cases := []struct {
		rev, branch string
		want        bool
	}{
		{"main", "main", true},
		{"refs/heads/main", "main", true},
		{"main", "refs/heads/main", true},
		{"release", "main", false},
		{"v1.2.0", "main", false},
		{"", "main", true},
		{"HEAD", "main", true},
		{"release", "", true},
	}
	for _, c := range cases {
		if got := DeploysBranch(c.rev, c.branch); got != c.want {
			t.Errorf("DeploysBranch(%q, %q) = %v, want %v", c.rev, c.branch, got, c.want)
		}
	}
}

// Health read before Argo CD compared the Application after its last sync may still
// describe the objects before the sync.
func TestHealthAssessedAfterSync(t *testing.T) {
	const finished = "2026-11-30T10:00:05Z"
	tests := map[string]struct {
		status AppStatus
		want   bool
	}{
		"compared after the sync":      {AppStatus{ReconciledAt: "2026-11-30T10:00:06Z", OperationState: &AppOperationState{FinishedAt: finished}}, true},
		"compared in the same second":  {AppStatus{ReconciledAt: finished, OperationState: &AppOperationState{FinishedAt: finished}}, true},
		"compared before the sync end": {AppStatus{ReconciledAt: "2026-11-30T10:00:04Z", OperationState: &AppOperationState{FinishedAt: finished}}, false},
		"sync still running":           {AppStatus{ReconciledAt: "2026-11-30T10:00:04Z", OperationState: &AppOperationState{}}, true},
		"never compared":               {AppStatus{OperationState: &AppOperationState{FinishedAt: finished}}, true},
		"no operation":                 {AppStatus{ReconciledAt: "2026-11-30T10:00:04Z"}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.status.HealthAssessedAfterSync(); got != tc.want {
				t.Errorf("HealthAssessedAfterSync() = %v, want %v", got, tc.want)
			}
		})
	}
}

// A chart from a Helm repository reading its values from a ref source sends a
// change to that ref source's repository, at its revision, in the directory of
// the values file; Chart names the chart.
func TestPrimarySourceOfAChartIsItsValues(t *testing.T) {
	app := Application{Name: "redis", Spec: AppSpec{Sources: []AppSource{
		{RepoURL: "https://charts.example.com", Chart: "redis", TargetRevision: "18.1.0", Helm: &AppSourceHelm{ValueFiles: []string{"$values/envs/prod/redis.yaml"}}},
		{RepoURL: "https://github.com/o/deploy", TargetRevision: "main", Ref: "values"},
	}}}
	src, ok := app.PrimarySource()
	if !ok || src.RepoURL != "https://github.com/o/deploy" || src.TargetRevision != "main" || src.Path != "envs/prod" {
		t.Fatalf("PrimarySource = %+v, %v; want the ref source at envs/prod", src, ok)
	}
	if got := app.Chart(); got != "redis 18.1.0 from https://charts.example.com" {
		t.Fatalf("Chart() = %q", got)
	}
	plain := Application{Spec: AppSpec{Source: &AppSource{RepoURL: "https://github.com/o/deploy", Path: "apps/web"}}}
	if got := plain.Chart(); got != "" {
		t.Fatalf("Chart() of a Git source = %q, want none", got)
	}
}

// Argo CD renders spec.sources whenever it lists any, and ignores a spec.source
// set beside it: a change goes to the first of spec.sources, not to spec.source.
func TestSourcesIgnoreSpecSourceBesideSpecSources(t *testing.T) {
	app := Application{Name: "web", Spec: AppSpec{
		Source:  &AppSource{RepoURL: "https://github.com/o/old", Path: "old"},
		Sources: []AppSource{{RepoURL: "https://github.com/o/deploy", Path: "apps/web"}},
	}}
	if !app.HasMultipleSources() {
		t.Fatal("HasMultipleSources = false for an Application listing spec.sources")
	}
	if got := app.Sources(); len(got) != 1 || got[0].Path != "apps/web" {
		t.Fatalf("Sources() = %+v, want spec.sources", got)
	}
	if src, ok := app.PrimarySource(); !ok || src.RepoURL != "https://github.com/o/deploy" {
		t.Fatalf("PrimarySource() = %+v, %v, want the first of spec.sources", src, ok)
	}
	single := Application{Spec: AppSpec{Source: &AppSource{Path: "only"}}}
	if single.HasMultipleSources() || len(single.Sources()) != 1 || single.Sources()[0].Path != "only" {
		t.Fatalf("an Application with spec.source alone: HasMultipleSources %v, Sources %+v", single.HasMultipleSources(), single.Sources())
	}
	if none := (Application{}); none.Sources() != nil {
		t.Fatalf("an Application without a source: Sources() = %+v", none.Sources())
	}
}
