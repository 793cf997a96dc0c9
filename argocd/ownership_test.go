package argocd

import (
	"strings"
	"testing"
)

func TestOwn(t *testing.T) {
	apps := NewAppIndex(fixtureApps(t))
	resources := fixtureResources(t)
	shop := AppKey{Namespace: argoNS, Name: "shop"}

	tests := map[string]struct {
		resource string
		apps     *AppIndex
		opts     Options
		// installationID is set as the resource's installation-id annotation.
		installationID string
		wantManaged    bool
		wantBy         Evidence
		wantApp        AppKey
		wantFound      bool
		wantLevel      Level
		wantUndet      bool
		wantWarning    string
	}{
		"annotation, self-heal app": {
			resource: "web", apps: apps,
			wantManaged: true, wantBy: EvidenceAnnotation, wantApp: shop, wantFound: true, wantLevel: LevelSelfHeal,
		},
		"annotation on a core-group object": {
			resource: "shop-settings", apps: apps,
			wantManaged: true, wantBy: EvidenceAnnotation, wantApp: shop, wantFound: true, wantLevel: LevelSelfHeal,
		},
		"label confirmed by status.resources": {
			resource: "billing-api", apps: apps,
			wantManaged: true, wantBy: EvidenceLabel, wantApp: AppKey{Namespace: argoNS, Name: "billing"}, wantFound: true, wantLevel: LevelAuto,
		},
		"label without Application (Helm)": {
			resource: "helm-web", apps: apps,
			wantLevel: LevelNone, wantWarning: "is not trusted: no such Application",
		},
		"manual app": {
			resource: "reports-api", apps: apps,
			wantManaged: true, wantBy: EvidenceAnnotation, wantApp: AppKey{Namespace: argoNS, Name: "reports"}, wantFound: true, wantLevel: LevelManual,
		},
		"apps in any namespace": {
			resource: "payments-api", apps: apps,
			wantManaged: true, wantBy: EvidenceAnnotation, wantApp: AppKey{Namespace: appsNS, Name: "payments"}, wantFound: true, wantLevel: LevelSelfHeal,
		},
		"hub and spoke: Application not in this cluster": {
			resource: "hub-web", apps: apps,
			wantManaged: true, wantBy: EvidenceAnnotation, wantApp: AppKey{Name: "platform-hub"}, wantLevel: LevelUnknown,
		},
		"copied annotation is not trusted": {
			resource: "copied-settings", apps: apps,
			wantLevel: LevelNone, wantWarning: "probably copied",
		},
		"no marks": {
			resource: "plain", apps: apps, wantLevel: LevelNone,
		},
		"installation id of another instance": {
			resource: "other-instance", apps: apps, opts: Options{InstallationID: "kukie-prod"},
			wantManaged: true, wantBy: EvidenceAnnotation, wantApp: AppKey{Name: "shop"}, wantLevel: LevelUnknown,
		},
		"installation id not configured, Application does not list the resource": {
			resource: "other-instance", apps: apps,
			wantManaged: true, wantBy: EvidenceAnnotation, wantApp: shop, wantLevel: LevelUnknown,
		},
		"installation id not configured, Application lists the resource": {
			resource: "web", apps: apps, installationID: "other-argocd",
			wantManaged: true, wantBy: EvidenceAnnotation, wantApp: shop, wantFound: true, wantLevel: LevelSelfHeal,
		},
		"installation id not configured, Applications unreadable": {
			resource: "web", apps: nil, installationID: "other-argocd",
			wantManaged: true, wantBy: EvidenceAnnotation, wantApp: AppKey{Name: "shop"}, wantLevel: LevelUnknown,
		},
		"annotation of this instance": {
			resource: "web", apps: apps, opts: Options{InstallationID: "kukie-prod"}, installationID: "kukie-prod",
			wantManaged: true, wantBy: EvidenceAnnotation, wantApp: shop, wantFound: true, wantLevel: LevelSelfHeal,
		},
		"no installation id on the resource, one configured": {
			resource: "web", apps: apps, opts: Options{InstallationID: "kukie-prod"},
			wantManaged: true, wantBy: EvidenceAnnotation, wantApp: AppKey{Name: "shop"}, wantLevel: LevelUnknown,
		},
		"configured control-plane namespace": {
			resource: "web", apps: apps, opts: Options{ControlPlaneNamespace: argoNS},
			wantManaged: true, wantBy: EvidenceAnnotation, wantApp: shop, wantFound: true, wantLevel: LevelSelfHeal,
		},
		"wrong control-plane namespace": {
			resource: "web", apps: apps, opts: Options{ControlPlaneNamespace: "gitops"},
			wantManaged: true, wantBy: EvidenceAnnotation, wantApp: AppKey{Namespace: "gitops", Name: "shop"}, wantLevel: LevelUnknown,
		},
		"annotation while Applications unreadable": {
			resource: "web", apps: nil,
			wantManaged: true, wantBy: EvidenceAnnotation, wantApp: AppKey{Name: "shop"}, wantLevel: LevelUnknown,
		},
		"label while Applications unreadable": {
			resource: "billing-api", apps: nil,
			wantLevel: LevelUnknown, wantUndet: true,
		},
		"no marks while Applications unreadable": {
			resource: "plain", apps: nil, wantLevel: LevelNone,
		},
		"custom instance label key ignores the default label": {
			resource: "billing-api", apps: apps, opts: Options{InstanceLabelKey: "argocd.argoproj.io/instance"},
			// billing still lists it, which is evidence of its own.
			wantManaged: true, wantBy: EvidenceStatus, wantApp: AppKey{Namespace: argoNS, Name: "billing"}, wantFound: true, wantLevel: LevelAuto,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, ok := resources[tc.resource]
			if !ok {
				t.Fatalf("no fixture resource %s", tc.resource)
			}
			if tc.installationID != "" {
				res.Annotations = copyMap(res.Annotations)
				res.Annotations[InstallationIDAnnotation] = tc.installationID
			}
			o := Own(res, tc.apps, tc.opts)
			if o.Managed != tc.wantManaged || o.By != tc.wantBy || o.Level != tc.wantLevel || o.Undetermined != tc.wantUndet {
				t.Fatalf("Own(%s) = managed %v by %q level %q undetermined %v (%s), want managed %v by %q level %q undetermined %v",
					tc.resource, o.Managed, o.By, o.Level, o.Undetermined, o.Reason, tc.wantManaged, tc.wantBy, tc.wantLevel, tc.wantUndet)
			}
			if tc.wantManaged && o.App != tc.wantApp {
				t.Errorf("application = %v, want %v", o.App, tc.wantApp)
			}
			if (o.Application != nil) != tc.wantFound {
				t.Errorf("application found = %v, want %v", o.Application != nil, tc.wantFound)
			}
			if tc.wantWarning != "" && !strings.Contains(strings.Join(o.Warnings, " "), tc.wantWarning) {
				t.Errorf("warnings %q do not mention %q", o.Warnings, tc.wantWarning)
			}
			if tc.wantWarning == "" && len(o.Warnings) > 0 {
				t.Errorf("unexpected warnings %q", o.Warnings)
			}
			if o.Reason == "" {
				t.Error("no reason given")
			}
		})
	}
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// A resource Argo CD has yet to create carries no marks; the Application listing it
// is what tells.
func TestOwnMissingResourceListedByApplication(t *testing.T) {
	apps := NewAppIndex(fixtureApps(t))
	ref := ResourceRef{Version: "v1", Kind: "ConfigMap", Namespace: workNS, Name: "billing-config"}
	o := Own(Resource{Ref: ref}, apps, Options{})
	if !o.Managed || o.By != EvidenceStatus || o.App != (AppKey{Namespace: argoNS, Name: "billing"}) {
		t.Fatalf("Own = %+v", o)
	}
}

// A resource listed by two Applications (Argo CD's SharedResourceWarning) is owned by
// the one that defends it most strongly, and the sharing is reported.
func TestOwnSharedResourcePrefersStrongestLevel(t *testing.T) {
	apps := NewAppIndex(fixtureApps(t))
	ref := ResourceRef{Version: "v1", Kind: "ConfigMap", Namespace: workNS, Name: "shop-settings"}
	o := Own(Resource{Ref: ref}, apps, Options{})
	if o.App.Name != "shop" || o.Level != LevelSelfHeal {
		t.Fatalf("Own = %+v, want shop at self_heal", o)
	}
	if !strings.Contains(strings.Join(o.Warnings, " "), "Several Argo CD applications") {
		t.Errorf("warnings %q do not report the sharing", o.Warnings)
	}
}

func TestOwnTrackingIDWithoutNamespaceMatchesNamespacedResource(t *testing.T) {
	apps := NewAppIndex(fixtureApps(t))
	res := Resource{
		Ref:         ResourceRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: workNS, Name: "web"},
		Annotations: map[string]string{TrackingIDAnnotation: "shop:apps/Deployment:/web"},
	}
	if o := Own(res, apps, Options{}); !o.Managed || o.Level != LevelSelfHeal {
		t.Fatalf("Own = %+v", o)
	}
}

func TestOwnMalformedAnnotationFallsBackToLabel(t *testing.T) {
	apps := NewAppIndex(fixtureApps(t))
	res := fixtureResources(t)["billing-api"]
	res.Annotations = map[string]string{TrackingIDAnnotation: "billing"}
	o := Own(res, apps, Options{})
	if !o.Managed || o.By != EvidenceLabel {
		t.Fatalf("Own = %+v, want managed by label", o)
	}
	if !strings.Contains(strings.Join(o.Warnings, " "), "ignored") {
		t.Errorf("warnings %q do not mention the ignored annotation", o.Warnings)
	}
}

// With Argo CD's namespace unknown, a name without namespace must not resolve to an
// Application in another namespace that happens to have the same name.
func TestResolveIgnoresSameNameOutsideControlPlane(t *testing.T) {
	apps := NewAppIndex([]Application{
		{Name: "web", Namespace: "team-a", Status: AppStatus{ControllerNamespace: "argocd"}},
	})
	app, key := apps.Resolve("web", ResourceRef{Kind: "ConfigMap", Namespace: "x", Name: "y"}, "")
	if app != nil {
		t.Fatalf("resolved to %s, want no Application", app.Key())
	}
	if key != (AppKey{Name: "web"}) {
		t.Errorf("key = %v", key)
	}
}
