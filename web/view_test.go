package web

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// TestChangePageSaysWhichObjectsAreOneRenamedConfigMap: the cluster diff of an
// edit that renames a generated ConfigMap has it removed and added; the page
// marks each half with the other name.
func TestChangePageSaysWhichObjectsAreOneRenamedConfigMap(t *testing.T) {
	pay, err := json.Marshal(plan.Payload{
		ClusterDiff: []render.ObjectDiff{
			{App: "web", APIVersion: "v1", Kind: "ConfigMap", Namespace: "web", Name: "web-settings-c4kffct259", Action: "added"},
			{App: "web", APIVersion: "v1", Kind: "ConfigMap", Namespace: "web", Name: "web-settings-k89gbb87k7", Action: "removed"},
			{App: "web", APIVersion: "v1", Kind: "ConfigMap", Namespace: "web", Name: "other", Action: "removed"},
		},
		Renames: []render.Rename{{App: "web", APIVersion: "v1", Kind: "ConfigMap", Namespace: "web", From: "web-settings-k89gbb87k7", To: "web-settings-c4kffct259", Generator: `configMapGenerator "web-settings" of apps/web/kustomization.yaml`}},
	})
	if err != nil {
		t.Fatal(err)
	}
	v := changePage(store.Plan{Code: "cm1", Payload: pay}, nil, "")
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, "change.html", v); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"web/web-settings-c4kffct259</code> <span class=\"renamed\">(renamed from web-settings-k89gbb87k7)</span>",
		"web/web-settings-k89gbb87k7</code> <span class=\"renamed\">(renamed to web-settings-c4kffct259)</span>",
		"web/other</code></h4>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestChangePageHidesTheRequestOfASecretInAnyCase: the request of a change whose
// target's kind names a Secret in another case ("secret") is not shown either
// (failed before: only "Secret" was hidden).
func TestChangePageHidesTheRequestOfASecretInAnyCase(t *testing.T) {
	for _, kind := range []string{"Secret", "secret", "SECRET"} {
		v := changePage(store.Plan{Code: "s1", Target: objref.Target{APIVersion: "v1", Kind: kind, Name: "db"},
			Change: json.RawMessage(`{"patch":{"merge":{"stringData":{"password":"planted"}}}}`)}, nil, "")
		if v.Request != "(a change of a Secret: its values are not shown)" {
			t.Errorf("kind %s: the page shows the request %q", kind, v.Request)
		}
	}
}

// TestChangePageOfARevertSaysWhatItReverts: the page of a revert showed the
// request of the change it reverts as its own, as if that change were asked for
// again; it now says which change it reverts, merged as which commit, and shows
// what that change was.
func TestChangePageOfARevertSaysWhatItReverts(t *testing.T) {
	merge := strings.Repeat("a", 40)
	pay, err := json.Marshal(plan.Payload{RollbackReference: merge, Reverts: merge})
	if err != nil {
		t.Fatal(err)
	}
	v := changePage(store.Plan{Code: "rb1", RollbackOf: "orig1", Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
		Change: json.RawMessage(`{"replicas":{"count":4}}`), Payload: pay}, nil, "")
	want := "Reverts change orig1, merged as " + merge + ", which was:\n{\n  \"replicas\": {\n    \"count\": 4\n  }\n}"
	if v.Request != want {
		t.Errorf("the page of a revert shows the request\n%s\nwant\n%s", v.Request, want)
	}
}
