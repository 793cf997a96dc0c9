package argocd

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func read(t *testing.T, name string) TargetRead {
	t.Helper()
	r, ok := fixtureResources(t)[name]
	if !ok {
		t.Fatalf("no fixture resource %s", name)
	}
	return TargetRead{Ref: r.Ref, Resource: &r}
}

func TestDecide(t *testing.T) {
	apps := NewAppIndex(fixtureApps(t))
	unreachable := &ReadError{Class: FailureUnreachable, Detail: "dial tcp 10.0.0.1:6443: connect: connection refused"}
	forbidden := &ReadError{Class: FailureForbidden, Detail: `applications.argoproj.io is forbidden: User "kukie" cannot list resource "applications"`}
	notInstalled := &ReadError{Class: FailureNotInstalled, Detail: "the server could not find the requested resource"}

	tests := map[string]struct {
		targets     []TargetRead
		apps        *AppIndex
		appsErr     *ReadError
		skipped     int
		wantPath    Path
		wantKnown   bool
		wantLevel   Level
		wantFailure FailureClass
		wantReason  []string
	}{
		"managed by self-heal app": {
			targets: []TargetRead{read(t, "web")}, apps: apps,
			wantPath: PathGit, wantKnown: true, wantLevel: LevelSelfHeal,
			wantReason: []string{"argocd/shop", "https://github.com/kukie-demo/shop-deploy.git", `"overlays/production"`, `"main"`},
		},
		"two targets, strongest level wins": {
			targets: []TargetRead{read(t, "reports-api"), read(t, "billing-api")}, apps: apps,
			wantPath: PathGit, wantKnown: true, wantLevel: LevelAuto,
		},
		"not managed": {
			targets: []TargetRead{read(t, "plain")}, apps: apps,
			wantPath: PathDirect, wantKnown: true, wantLevel: LevelNone,
			wantReason: []string{"does not manage it", "stays as made"},
		},
		"managed and unmanaged targets": {
			targets: []TargetRead{read(t, "plain"), read(t, "reports-api")}, apps: apps,
			wantPath: PathGit, wantKnown: true, wantLevel: LevelManual,
			wantReason: []string{"Not managed: apps/Deployment shop/plain"},
		},
		"hub and spoke": {
			targets: []TargetRead{read(t, "hub-web")}, apps: apps,
			wantPath: PathGit, wantKnown: true, wantLevel: LevelUnknown,
			wantReason: []string{"platform-hub", "another cluster"},
		},
		"target unreachable": {
			targets: []TargetRead{{Ref: read(t, "web").Ref, Err: unreachable}}, apps: apps,
			wantPath: PathDirect, wantKnown: false, wantLevel: LevelUnknown, wantFailure: FailureUnreachable,
			wantReason: []string{"could not be reached", "connection refused", "credentials"},
		},
		"label only, Applications forbidden": {
			targets: []TargetRead{read(t, "billing-api")}, appsErr: forbidden,
			wantPath: PathDirect, wantKnown: false, wantLevel: LevelUnknown, wantFailure: FailureForbidden,
			wantReason: []string{"may not read Argo CD Applications", "grant them get and list"},
		},
		"label only, Application type not installed": {
			targets: []TargetRead{read(t, "billing-api")}, appsErr: notInstalled,
			wantPath: PathDirect, wantKnown: false, wantLevel: LevelUnknown, wantFailure: FailureNotInstalled,
			wantReason: []string{"applications.argoproj.io", "not served"},
		},
		"annotation, Application type not installed": {
			targets: []TargetRead{read(t, "web")}, appsErr: notInstalled,
			wantPath: PathGit, wantKnown: true, wantLevel: LevelUnknown, wantFailure: FailureNotInstalled,
		},
		"no marks, Application type not installed": {
			targets: []TargetRead{read(t, "plain")}, appsErr: notInstalled,
			wantPath: PathDirect, wantKnown: true, wantLevel: LevelNone,
		},
		"one of two targets unreadable": {
			targets: []TargetRead{read(t, "web"), {Ref: read(t, "plain").Ref, Err: forbidden}}, apps: apps,
			wantPath: PathDirect, wantKnown: false, wantLevel: LevelUnknown, wantFailure: FailureForbidden,
		},
		"missing target listed by an Application": {
			targets: []TargetRead{{Ref: ResourceRef{Version: "v1", Kind: "ConfigMap", Namespace: workNS, Name: "billing-config"}, Missing: true}}, apps: apps,
			wantPath: PathGit, wantKnown: true, wantLevel: LevelAuto,
		},
		"missing target nobody lists": {
			targets: []TargetRead{{Ref: ResourceRef{Version: "v1", Kind: "ConfigMap", Namespace: workNS, Name: "nope"}, Missing: true}}, apps: apps,
			wantPath: PathDirect, wantKnown: true, wantLevel: LevelNone,
			wantReason: []string{"does not exist in the cluster"},
		},
		"skipped targets are reported": {
			targets: []TargetRead{read(t, "plain")}, apps: apps, skipped: 3,
			wantPath: PathDirect, wantKnown: true, wantLevel: LevelNone,
			wantReason: []string{"Only the first 1 of 4 targets were examined."},
		},
		"no Applications and no error given": {
			targets:  []TargetRead{read(t, "billing-api")},
			wantPath: PathDirect, wantKnown: false, wantLevel: LevelUnknown, wantFailure: FailureOther,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := Decide(DecideInput{Targets: tc.targets, Apps: tc.apps, AppsErr: tc.appsErr, Skipped: tc.skipped})
			if d.Path != tc.wantPath || d.Known != tc.wantKnown || d.Level != tc.wantLevel || d.Failure != tc.wantFailure {
				t.Fatalf("Decide = path %s known %v level %s failure %q (%s); want path %s known %v level %s failure %q",
					d.Path, d.Known, d.Level, d.Failure, d.Reason, tc.wantPath, tc.wantKnown, tc.wantLevel, tc.wantFailure)
			}
			for _, want := range tc.wantReason {
				if !strings.Contains(d.Reason, want) {
					t.Errorf("reason %q does not contain %q", d.Reason, want)
				}
			}
			if len(d.Targets) != len(tc.targets) {
				t.Errorf("%d target decisions for %d targets", len(d.Targets), len(tc.targets))
			}
		})
	}
}

func TestPayload(t *testing.T) {
	apps := NewAppIndex(fixtureApps(t))
	d := Decide(DecideInput{Targets: []TargetRead{read(t, "web"), read(t, "payments-api"), read(t, "plain")}, Apps: apps})
	p := d.Payload()

	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var shape map[string]any
	if err := json.Unmarshal(raw, &shape); err != nil {
		t.Fatal(err)
	}
	assertKeys(t, "payload", shape, "summary", "level", "warning", "applications", "resources")
	assertKeys(t, "application", shape["applications"].([]any)[0].(map[string]any),
		"name", "namespace", "repoURL", "path", "targetRevision", "sourceType", "automated", "self_heal")
	assertKeys(t, "resource", shape["resources"].([]any)[0].(map[string]any),
		"group", "kind", "namespace", "name", "application")

	if p.Level != LevelSelfHeal {
		t.Errorf("level = %s, want self_heal", p.Level)
	}
	if !strings.Contains(p.Warning, "Argo CD will revert this within seconds") {
		t.Errorf("warning %q does not say the change is reverted within seconds", p.Warning)
	}
	wantApps := []PayloadApp{
		{Name: "shop", Namespace: argoNS, RepoURL: "https://github.com/kukie-demo/shop-deploy.git", Path: "overlays/production", TargetRevision: "main", SourceType: "Kustomize", Automated: true, SelfHeal: true},
		{Name: "payments", Namespace: appsNS, RepoURL: "https://github.com/kukie-demo/payments", Path: "k8s/prod", TargetRevision: "HEAD", SourceType: "Directory", Automated: true, SelfHeal: true},
	}
	sort.Slice(wantApps, func(i, j int) bool { return wantApps[i].Namespace < wantApps[j].Namespace })
	if !reflect.DeepEqual(p.Applications, wantApps) {
		t.Errorf("applications = %+v\nwant %+v", p.Applications, wantApps)
	}
	wantResources := []PayloadResource{
		{Group: "apps", Kind: "Deployment", Namespace: workNS, Name: "web", Application: argoNS + "/shop"},
		{Group: "apps", Kind: "Deployment", Namespace: workNS, Name: "payments-api", Application: appsNS + "/payments"},
		{Group: "apps", Kind: "Deployment", Namespace: workNS, Name: "plain"},
	}
	if !reflect.DeepEqual(p.Resources, wantResources) {
		t.Errorf("resources = %+v\nwant %+v", p.Resources, wantResources)
	}
	if !strings.HasPrefix(p.Summary, "Git: 2 of 3 target(s)") {
		t.Errorf("summary = %q", p.Summary)
	}
}

func TestPayloadWarnings(t *testing.T) {
	apps := NewAppIndex(fixtureApps(t))
	tests := map[string]struct {
		in   DecideInput
		want []string
	}{
		"auto": {
			in:   DecideInput{Targets: []TargetRead{read(t, "billing-api")}, Apps: apps},
			want: []string{"syncs automatically", "overwritten by the next sync"},
		},
		"manual": {
			in:   DecideInput{Targets: []TargetRead{read(t, "reports-api")}, Apps: apps},
			want: []string{"syncs manually", "OutOfSync"},
		},
		"unknown": {
			in:   DecideInput{Targets: []TargetRead{read(t, "hub-web")}, Apps: apps},
			want: []string{"could not be read", "may revert"},
		},
		"copied annotation": {
			in:   DecideInput{Targets: []TargetRead{read(t, "copied-settings")}, Apps: apps},
			want: []string{"probably copied"},
		},
		"undecided": {
			in:   DecideInput{Targets: []TargetRead{{Ref: read(t, "web").Ref, Err: &ReadError{Class: FailureUnreachable, Detail: "timeout"}}}, Apps: apps},
			want: []string{"could not be read", "reverted within seconds"},
		},
		"not managed": {
			in:   DecideInput{Targets: []TargetRead{read(t, "plain")}, Apps: apps},
			want: nil,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := Decide(tc.in).Payload()
			if tc.want == nil && p.Warning != "" {
				t.Errorf("warning = %q, want none", p.Warning)
			}
			for _, w := range tc.want {
				if !strings.Contains(p.Warning, w) {
					t.Errorf("warning %q does not contain %q", p.Warning, w)
				}
			}
		})
	}
}

func assertKeys(t *testing.T, what string, m map[string]any, keys ...string) {
	t.Helper()
	var got []string
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	sort.Strings(keys)
	if !reflect.DeepEqual(got, keys) {
		t.Errorf("%s keys = %v, want %v", what, got, keys)
	}
}

func TestStrongest(t *testing.T) {
	tests := map[string]struct {
		in   []Level
		want Level
	}{
		"none":                     {in: nil, want: LevelNone},
		"manual below auto":        {in: []Level{LevelManual, LevelAuto}, want: LevelAuto},
		"unknown above auto":       {in: []Level{LevelAuto, LevelUnknown}, want: LevelUnknown},
		"self-heal above unknown":  {in: []Level{LevelUnknown, LevelSelfHeal, LevelManual}, want: LevelSelfHeal},
		"manual above not managed": {in: []Level{LevelNone, LevelManual}, want: LevelManual},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Strongest(tc.in...); got != tc.want {
				t.Errorf("Strongest(%v) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}
