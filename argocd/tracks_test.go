package argocd

import "testing"

func TestTracksMatchesWhatArgoCDWrites(t *testing.T) {
	cases := map[string]struct {
		id   string
		ref  ResourceRef
		want bool
	}{
		"namespaced object": {
			id: "web:apps/Deployment:shop/web", ref: ResourceRef{Group: "apps", Kind: "Deployment", Namespace: "shop", Name: "web"}, want: true,
		},
		"namespaced object elsewhere": {
			id: "web:apps/Deployment:shop/web", ref: ResourceRef{Group: "apps", Kind: "Deployment", Namespace: "other", Name: "web"},
		},
		"cluster-scoped object with the destination namespace in its id": {
			id:  "web:rbac.authorization.k8s.io/ClusterRole:e2e-web/web-reader",
			ref: ResourceRef{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "web-reader"}, want: true,
		},
		"cluster-scoped object of another name": {
			id:  "web:rbac.authorization.k8s.io/ClusterRole:e2e-web/web-reader",
			ref: ResourceRef{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "admin"},
		},
		"id without namespace": {
			id: "web:/ConfigMap:/settings", ref: ResourceRef{Kind: "ConfigMap", Namespace: "shop", Name: "settings"}, want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			id, err := ParseTrackingID(tc.id)
			if err != nil {
				t.Fatal(err)
			}
			if got := tracks(id, tc.ref); got != tc.want {
				t.Fatalf("tracks(%s, %s) = %v, want %v", tc.id, tc.ref, got, tc.want)
			}
		})
	}
}
