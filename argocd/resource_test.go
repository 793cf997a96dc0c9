package argocd

import (
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/objref"
)

func TestRefOf(t *testing.T) {
	cases := map[string]struct {
		target  objref.Target
		want    ResourceRef
		wantErr string
	}{
		"named group": {target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
			want: ResourceRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "web"}},
		"core group": {target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "app"},
			want: ResourceRef{Version: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "app"}},
		"cluster-scoped": {target: objref.Target{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "view"},
			want: ResourceRef{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "view"}},
		"malformed apiVersion": {target: objref.Target{APIVersion: "a/b/c", Kind: "Deployment", Name: "web"}, wantErr: `apiVersion "a/b/c"`},
		"no kind":              {target: objref.Target{APIVersion: "apps/v1", Name: "web"}, wantErr: "kind and name are required"},
		"no name":              {target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment"}, wantErr: "kind and name are required"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := RefOf(tc.target)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("RefOf(%+v) = %+v, %v; want an error containing %q", tc.target, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("RefOf(%+v) = %+v, want %+v", tc.target, got, tc.want)
			}
		})
	}
}
