package policy

import (
	"os"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/render"
)

// TestDryRunFindingsAtTheFieldsLine: a refusal is marked at the line of the
// field the API server names (list items by their name), the nearest enclosing
// field the source spells when it does not, and the object's document when the
// API server names none.
func TestDryRunFindingsAtTheFieldsLine(t *testing.T) {
	dir := testtree.Write(t, ruleFiles)
	c, err := Parse([]byte("rules:\n  dry_run: {level: warning}\n"))
	if err != nil {
		t.Fatal(err)
	}
	app := renderApp(t, dir, shopApp)
	object := func(kind string) render.Object {
		for _, o := range app.Objects {
			if manifestKind(o.Manifest) == kind && o.GeneratedBy == "" {
				return o
			}
		}
		t.Fatalf("no %s rendered", kind)
		return render.Object{}
	}
	cases := map[string]struct {
		kind   string
		fields []string
		want   string
	}{
		"a container's field":            {"Deployment", []string{"spec.template.spec.containers[0].image"}, "apps/shop/deployment.yaml:13"},
		"an init container's field":      {"Deployment", []string{"spec.template.spec.initContainers[0].image", "spec.replicas"}, "apps/shop/deployment.yaml:10"},
		"an item past the list":          {"Deployment", []string{"spec.template.spec.containers[3].image"}, "apps/shop/deployment.yaml:11"},
		"a field the source lacks":       {"Deployment", []string{"metadata.labels[app.kubernetes.io/name]"}, "apps/shop/deployment.yaml:3"},
		"no field":                       {"Deployment", nil, "apps/shop/deployment.yaml:1"},
		"a map key in brackets":          {"Secret", []string{"stringData[token]"}, "apps/shop/rbac.yaml:19"},
		"a namespace from the app":       {"ClusterRoleBinding", []string{"metadata.namespace"}, "apps/shop/rbac.yaml:3"},
		"a field path that is malformed": {"Secret", []string{"stringData[token"}, "apps/shop/rbac.yaml:18"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := c.DryRunFindings(app, os.DirFS(dir), []Refusal{{Object: object(tc.kind), Fields: tc.fields, Message: "refused"}})
			if len(got) != 1 {
				t.Fatalf("findings %+v, want one", got)
			}
			f := got[0]
			if s := spots(got)[0]; s != "dry_run "+tc.want || f.Level != LevelWarning || !strings.HasSuffix(f.Message, ": refused") || f.App != "shop" {
				t.Fatalf("finding %s %+v, want dry_run %s at warning", s, f, tc.want)
			}
		})
	}
	off, err := Parse([]byte("rules:\n  image_digest: {level: error}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := off.DryRunFindings(app, os.DirFS(dir), []Refusal{{Object: object("Secret"), Message: "refused"}}); got != nil {
		t.Errorf("findings with the rule off: %+v", got)
	}
}
