package render

import (
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// Templates that include each other without a cycle (a diamond, a subchart's
// helper used by its parent, the same helper many times) are not recursion; a
// cycle through a subchart's helper is.
func TestRecursiveTemplates(t *testing.T) {
	newChart := func(name string, templates map[string]string, deps ...*chart.Chart) *chart.Chart {
		c := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: name, Version: "0.1.0"}}
		for n, data := range templates {
			c.Templates = append(c.Templates, &common.File{Name: n, Data: []byte(data)})
		}
		for _, d := range deps {
			c.AddDependency(d)
		}
		return c
	}
	lib := func(helper string) *chart.Chart {
		return newChart("lib", map[string]string{"templates/_lib.tpl": `{{ define "lib.name" }}` + helper + `{{ end }}`})
	}
	cases := map[string]struct {
		ch   *chart.Chart
		want string
	}{
		"a diamond": {newChart("web", map[string]string{
			"templates/_h.tpl":  `{{ define "a" }}{{ include "b" . }}{{ include "c" . }}{{ end }}{{ define "b" }}{{ include "d" . }}{{ end }}{{ define "c" }}{{ template "d" . }}{{ end }}{{ define "d" }}x{{ end }}`,
			"templates/cm.yaml": `{{ include "a" . }}{{ include "a" . }}{{ include (print "d") . }}`,
		}), ""},
		"a subchart's helper": {newChart("web", map[string]string{"templates/cm.yaml": `{{ include "lib.name" . }}`}, lib("lib")), ""},
		"a cycle through a subchart's helper": {newChart("web", map[string]string{
			"templates/_h.tpl": `{{ define "web.name" }}{{ include "lib.name" . }}{{ end }}`,
		}, lib(`{{ if .x }}{{ include "web.name" . }}{{ end }}`)), "lib.name -> web.name -> lib.name"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := recursiveTemplates(tc.ch); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
