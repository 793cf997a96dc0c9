package argocd

import (
	"errors"
	"testing"
)

func TestParseTrackingID(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    TrackingID
		wantErr bool
	}{
		"namespaced in apps group": {
			in:   "shop:apps/Deployment:shop/web",
			want: TrackingID{AppInstance: "shop", Group: "apps", Kind: "Deployment", Namespace: "shop", Name: "web"},
		},
		"core group is empty": {
			in:   "shop:/ConfigMap:shop/settings",
			want: TrackingID{AppInstance: "shop", Kind: "ConfigMap", Namespace: "shop", Name: "settings"},
		},
		"cluster-scoped has empty namespace": {
			in:   "platform:rbac.authorization.k8s.io/ClusterRole:/view-all",
			want: TrackingID{AppInstance: "platform", Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view-all"},
		},
		"apps in any namespace": {
			in:   "team-a_payments:apps/Deployment:payments/api",
			want: TrackingID{AppInstance: "team-a_payments", Group: "apps", Kind: "Deployment", Namespace: "payments", Name: "api"},
		},
		"resource name with colons": {
			in:   "rbac:rbac.authorization.k8s.io/ClusterRole:/system:aggregate-to-view",
			want: TrackingID{AppInstance: "rbac", Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:aggregate-to-view"},
		},
		"label-style value":          {in: "shop", wantErr: true},
		"missing namespace part":     {in: "shop:apps/Deployment", wantErr: true},
		"missing group separator":    {in: "shop:Deployment:shop/web", wantErr: true},
		"missing name separator":     {in: "shop:apps/Deployment:web", wantErr: true},
		"empty application":          {in: ":apps/Deployment:shop/web", wantErr: true},
		"empty kind":                 {in: "shop:apps/:shop/web", wantErr: true},
		"empty name":                 {in: "shop:apps/Deployment:shop/", wantErr: true},
		"slash in name":              {in: "shop:apps/Deployment:shop/web/x", wantErr: true},
		"kind with slash":            {in: "shop:apps/v1/Deployment:shop/web", wantErr: true},
		"space in name":              {in: "shop:apps/Deployment:shop/web x", wantErr: true},
		"upper-case group":           {in: "shop:Apps/Deployment:shop/web", wantErr: true},
		"half instance name":         {in: "team-a_:apps/Deployment:shop/web", wantErr: true},
		"namespace with colon":       {in: "shop:apps/Deployment:sh:op/web", wantErr: true},
		"empty":                      {in: "", wantErr: true},
		"newline at end of the name": {in: "shop:apps/Deployment:shop/web\n", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseTrackingID(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseTrackingID(%q) = %+v, want an error", tc.in, got)
				}
				if !errors.Is(err, ErrTrackingID) {
					t.Errorf("error %v does not wrap ErrTrackingID", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTrackingID(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("ParseTrackingID(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			if s := got.String(); s != tc.in {
				t.Errorf("String() = %q, want %q", s, tc.in)
			}
		})
	}
}

func TestInstanceNames(t *testing.T) {
	tests := map[string]struct {
		in            string
		wantNamespace string
		wantName      string
		wantErr       bool
	}{
		"control-plane app": {in: "shop", wantName: "shop"},
		"app in namespace":  {in: "team-a_shop", wantNamespace: "team-a", wantName: "shop"},
		"empty":             {in: "", wantErr: true},
		"empty namespace":   {in: "_shop", wantErr: true},
		"empty name":        {in: "team-a_", wantErr: true},
		"colon":             {in: "team:a", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns, n, err := ParseInstanceName(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseInstanceName(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			}
			if ns != tc.wantNamespace || n != tc.wantName {
				t.Errorf("ParseInstanceName(%q) = %q, %q", tc.in, ns, n)
			}
			if err == nil && FormatInstanceName(ns, n, "") != tc.in {
				t.Errorf("FormatInstanceName(%q, %q) = %q, want %q", ns, n, FormatInstanceName(ns, n, ""), tc.in)
			}
		})
	}
	if got := FormatInstanceName("argocd", "shop", "argocd"); got != "shop" {
		t.Errorf("an app in the control-plane namespace is named %q, want shop", got)
	}
}

func FuzzParseTrackingID(f *testing.F) {
	for _, s := range []string{
		"shop:apps/Deployment:shop/web",
		"shop:/ConfigMap:shop/settings",
		"p:rbac.authorization.k8s.io/ClusterRole:/system:aggregate-to-view",
		"team-a_payments:apps/Deployment:payments/api",
		"a:b/C:d/e/f", ":::", "a:/K:/", "x_:/K:/n", "\x00:/K:/n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseTrackingID(s)
		if err != nil {
			return
		}
		if got := id.String(); got != s {
			t.Fatalf("ParseTrackingID(%q).String() = %q", s, got)
		}
		again, err := ParseTrackingID(id.String())
		if err != nil || again != id {
			t.Fatalf("re-parse of %q = %+v, %v; want %+v", s, again, err, id)
		}
		if _, _, err := ParseInstanceName(id.AppInstance); err != nil {
			t.Fatalf("accepted id %q has an invalid application name: %v", s, err)
		}
	})
}
