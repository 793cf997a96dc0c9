package kube_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

// argocd-cm is read from the namespace asked for (else the cluster's control-plane
// namespace); only its render settings come back, and a namespace without one is
// Argo CD's defaults.
func TestArgoCDSettingsReadsOnlyTheRenderSettingsOfArgoCDCM(t *testing.T) {
	env := kubetest.StartPrivate(t, kubetest.Options{})
	argoNS, otherNS := env.Namespace(t, "argocd"), env.Namespace(t, "other")
	cm := kubetest.ConfigMap(argoNS, argocd.SettingsConfigMap, nil, nil)
	cm.Object["data"] = map[string]any{
		"kustomize.buildOptions":        "--load-restrictor LoadRestrictionsNone",
		"kustomize.path.v5.4.3":         "/custom-tools/kustomize_5_4_3",
		"kustomize.buildOptions.v5.4.3": "--enable-helm",
		"oidc.config":                   "clientSecret: not-for-us",
	}
	env.Create(t, cm)
	ctx := context.Background()

	c := clusterFor(t, env.Kubeconfig, kube.Options{Argo: argocd.Options{ControlPlaneNamespace: argoNS}})
	got, err := c.ArgoCDSettings(ctx, "", kube.Fresh)
	if err != nil {
		t.Fatal(err)
	}
	want := argocd.Settings{KustomizeBuildOptions: "--load-restrictor LoadRestrictionsNone", KustomizeVersions: []string{"v5.4.3"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("settings of the control-plane namespace = %+v, want %+v", got, want)
	}
	got, err = c.ArgoCDSettings(ctx, otherNS, kube.Fresh)
	if err != nil || !reflect.DeepEqual(got, argocd.Settings{}) {
		t.Fatalf("a namespace without argocd-cm: %+v, %v; want Argo CD's defaults", got, err)
	}
}
