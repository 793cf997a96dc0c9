package argocd

import (
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
