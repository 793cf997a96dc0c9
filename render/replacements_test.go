package render

import (
	"testing"

	"github.com/kukie/kukie-gitops/render/yamledit"
)

// TestReplacementFieldPathCoversChangedFields: a replacement's field path, in
// kustomize's spelling, covers the changed fields as the cluster diff names
// them: the field itself, any field below it, and "*" for any key or list item,
// never a field whose name only begins like it.
func TestReplacementFieldPathCoversChangedFields(t *testing.T) {
	cases := []struct {
		fieldPath, changed string
		want               bool
	}{
		{"spec.replicas", "spec.replicas", true},
		{"spec.replica", "spec.replicas", false},
		{"spec.template.spec.containers.[name=web].image", "spec.template.spec.containers[name=web].image", true},
		{"spec.template.spec.containers.[name=web].image", "spec.template.spec.containers[name=proxy].image", false},
		{"spec.template.spec.containers.*.image", "spec.template.spec.containers[name=proxy].image", true},
		{"spec.template.spec.containers.[name=web].env", "spec.template.spec.containers[name=web].env[name=HOST].value", true},
		{"metadata.annotations.*", "metadata.annotations.team", true},
		{"*.replicas", "spec.replicas", true},
		{"data.host", "data.hostname", false},
	}
	for _, tc := range cases {
		if got := fieldPathPattern(tc.fieldPath).MatchString(tc.changed); got != tc.want {
			t.Errorf("%s covers %s: %v, want %v", tc.fieldPath, tc.changed, got, tc.want)
		}
	}
}

// TestReplacementSourcePathIsAnEditorPath: a source's field path of keys, list
// indexes and [key=value] items is the path the editor sets; a wildcard names
// no one field to edit.
func TestReplacementSourcePathIsAnEditorPath(t *testing.T) {
	got, ok := yamlPathOf("spec.template.spec.containers.[name=web].env.0.value")
	want := yamledit.Path{yamledit.K("spec"), yamledit.K("template"), yamledit.K("spec"), yamledit.K("containers"),
		yamledit.M("name", "web"), yamledit.K("env"), yamledit.I(0), yamledit.K("value")}
	if !ok || got.String() != want.String() {
		t.Fatalf("got %v (%v), want %v", got, ok, want)
	}
	if p, ok := yamlPathOf("data.tag"); !ok || p.String() != "data.tag" {
		t.Fatalf("data.tag: got %v (%v)", p, ok)
	}
	for _, fp := range []string{"spec.*.image", "[name=web]", "a.[name]"} {
		if p, ok := yamlPathOf(fp); ok {
			t.Errorf("%s: got %v, want no path", fp, p)
		}
	}
}
