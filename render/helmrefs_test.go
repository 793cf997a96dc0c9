package render

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

func TestTemplateValuesPaths(t *testing.T) {
	text := `{{- with .Values.ingress }}
{{- with .annotations }}{{ toYaml . }}{{ end }}
host: {{ .host | default $.Values.defaultHost }}
{{- end }}
{{- range $k, $v := .Values.env }}{{ .name }}{{ $k }}{{ end }}
{{- define "x.labels" }}{{ toYaml .Values.commonLabels }}{{ end }}
{{ include "x.labels" . }}{{ index .Values "skipped" }}{{ .Release.Name }}`
	budget := newRefBudget()
	var got []string
	for _, p := range templateValuesPaths("t.yaml", text, &budget) {
		got = append(got, strings.Join(p, "."))
	}
	slices.Sort(got)
	want := []string{"commonLabels", "defaultHost", "env", "ingress", "ingress.annotations", "ingress.host", "skipped"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestTemplateValuesPathsBounded(t *testing.T) {
	var b strings.Builder
	for i := range 2000 {
		b.WriteString("{{ .Values.k")
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString(".a" + strings.Repeat(".b", i%20) + " }}\n")
	}
	budget := newRefBudget()
	budget.refs = 10
	if got := templateValuesPaths("t.yaml", b.String(), &budget); len(got) != 10 {
		t.Errorf("collected %d paths, want the bound of 10", len(got))
	}
	if got := templateValuesPaths("bad.yaml", "{{ .Values.a", &budget); got != nil {
		t.Errorf("a template that does not parse gave %v", got)
	}
}

func TestUnreadValue(t *testing.T) {
	cases := []struct {
		name     string
		old, new any
		want     string
		ok       bool
	}{
		{"not rendered now", nil, map[string]any{"a": "1"}, "map[a:1]", true},
		{"keys added", map[string]any{"a": "1"}, map[string]any{"a": "1", "b": "2"}, "map[b:2]", true},
		{"a key changed", map[string]any{"a": "1"}, map[string]any{"a": "2", "b": "2"}, "", false},
		{"a key removed", map[string]any{"a": "1", "c": "3"}, map[string]any{"a": "1", "b": "2"}, "", false},
		{"items appended", []any{"x"}, []any{"x", "y"}, "[y]", true},
		{"items replaced", []any{"x"}, []any{"z", "y"}, "", false},
		{"a scalar with a default", int64(1), int64(3), "3", true},
		{"a removal", "a", nil, "", false},
	}
	for _, c := range cases {
		v, ok := unreadValue(fieldChange{old: c.old, new: c.new})
		if ok != c.ok || ok && fmt.Sprint(v) != c.want {
			t.Errorf("%s: got %v, %v; want %s, %v", c.name, v, ok, c.want, c.ok)
		}
	}
}

// A chart's templates are read up to the byte budget; the refs read before it
// ran out keep the rank of a chart none of whose templates read writes the
// target's kind (failed before: they kept rank 1, ahead of another chart's
// refs), and no subchart is read past it.
func TestChartValuesRefsByteBudget(t *testing.T) {
	sub := &chart.Chart{Metadata: &chart.Metadata{Name: "worker"},
		Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte("{{ .Values.sub.key }}")}}}
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "web"}, Templates: []*common.File{
		{Name: "templates/a.yaml", Data: []byte("kind: ConfigMap\n{{ .Values.first }}")},
		{Name: "templates/b.yaml", Data: []byte("kind: Ingress\n{{ .Values.second }}")},
	}}
	ch.SetDependencies(sub)
	budget := newRefBudget()
	budget.bytes = len(ch.Templates[0].Data)
	refs := chartValuesRefs(ch, ch.Dependencies(), nil, "Ingress", &budget, 0)
	if len(refs) != 1 || strings.Join(refs[0].path, ".") != "first" {
		t.Fatalf("refs read within the budget: %+v, want first alone", refs)
	}
	if refs[0].rank != 2 {
		t.Errorf("rank of a ref of a chart whose templates read write no Ingress: %d, want 2", refs[0].rank)
	}
}

// templateRefs are the paths templateValuesPaths reads in text, dotted, sorted.
func templateRefs(t *testing.T, text string) []string {
	t.Helper()
	budget := newRefBudget()
	var got []string
	for _, p := range templateValuesPaths("t.yaml", text, &budget) {
		got = append(got, strings.Join(p, "."))
	}
	slices.Sort(got)
	return got
}

// index with string keys reads the path they spell, from .Values, from a
// values path or from the top of the data; a key that is no string literal
// (an item's number, a variable) ends the path read there.
func TestTemplateValuesPathsIndex(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
	}{
		{"from .Values", `{{ index .Values "ingress" "annotations" | toYaml }}`, []string{"ingress.annotations"}},
		{"from a values path", `{{ index .Values.ingress "annotations" }}`, []string{"ingress.annotations"}},
		{"raw strings", "{{ index .Values `ingress` `class-name` }}", []string{"ingress.class-name"}},
		{"from the top", `{{ index $ "Values" "ingress" "tls" }}{{ index . "Values" "host" }}`, []string{"host", "ingress.tls"}},
		{"inside a with", `{{ with .Values.ingress }}{{ index . "annotations" }}{{ end }}`, []string{"ingress", "ingress.annotations"}},
		{"with of an index", `{{ with index .Values "ingress" }}{{ .annotations }}{{ end }}`, []string{"ingress", "ingress.annotations"}},
		{"a number ends it", `{{ index .Values.hosts 0 "name" }}`, []string{"hosts"}},
		{"a variable ends it", `{{ range $k, $v := .Values.env }}{{ index $.Values.env $k "x" }}{{ end }}`, []string{"env"}},
		{"not of values", `{{ index .Release "Name" }}{{ index .Capabilities.APIVersions 0 }}`, nil},
		{"parenthesized", `{{ (index .Values "ingress").annotations }}{{ toYaml (index .Values "labels") }}`, []string{"ingress.annotations", "labels"}},
	}
	for _, c := range cases {
		if got := templateRefs(t, c.text); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// A variable holds what it was given: the top of the data, a values path, or
// an item of a range, which no path names; each is seen where text/template
// scopes it (to the end of the if, with or range that declares it).
func TestTemplateValuesPathsVariables(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
	}{
		{"of a values path", `{{- $ing := .Values.ingress }}{{ toYaml $ing.annotations }}`, []string{"ingress", "ingress.annotations"}},
		{"of the top", `{{ $root := . }}{{ with .Values.a }}{{ $root.Values.x }}{{ end }}`, []string{"a", "x"}},
		{"of .Values", `{{ $v := .Values }}{{ $v.y }}{{ with .Values }}{{ .z }}{{ end }}`, []string{"y", "z"}},
		{"of an index", `{{ $ing := index .Values "ingress" }}{{ $ing.tls }}`, []string{"ingress", "ingress.tls"}},
		{"of a variable", `{{ $a := .Values.a }}{{ $b := $a.b }}{{ $b.c }}`, []string{"a", "a.b", "a.b.c"}},
		{"the top inside a range", `{{ range .Values.items }}{{ $.Values.x }}{{ end }}`, []string{"items", "x"}},
		{"declared by a with", `{{ with $i := .Values.ingress }}{{ $i.tls }}{{ .host }}{{ end }}`, []string{"ingress", "ingress.host", "ingress.tls"}},
		{"declared by an if", `{{ if $e := .Values.extra }}{{ $e.k }}{{ .Values.q }}{{ end }}`, []string{"extra", "extra.k", "q"}},
		{"items of a range", `{{ range $i, $h := .Values.hosts }}{{ $h.name }}{{ .path }}{{ $i.x }}{{ end }}`, []string{"hosts"}},
		{"an item given a name", `{{ range .Values.items }}{{ $it := . }}{{ $it.k }}{{ end }}`, []string{"items"}},
		{"a range of a variable", `{{ $hs := .Values.hosts }}{{ range $hs }}{{ .name }}{{ end }}`, []string{"hosts"}},
		{"shadowed in a range", `{{ $v := .Values.a }}{{ range .Values.list }}{{ $v := . }}{{ $v.z }}{{ end }}{{ $v.y }}`, []string{"a", "a.y", "list"}},
		{"out of scope", `{{ with .Values.a }}{{ $x := .b }}{{ end }}{{ $x := .Values.c }}{{ $x.d }}`, []string{"a", "a.b", "c", "c.d"}},
		{"assigned again", `{{ $v := .Values.a }}{{ $v = .Values.b }}{{ $v.c }}`, []string{"a", "b", "b.c"}},
		{"in a define", `{{ define "d" }}{{ $top := . }}{{ $top.Values.z }}{{ end }}`, []string{"z"}},
		{"else with", `{{ with .Values.a }}{{ .x }}{{ else with .Values.b }}{{ .y }}{{ end }}`, []string{"a", "a.x", "b", "b.y"}},
		{"of what a function returns", `{{ $d := .Values.a | default dict }}{{ $d.k }}`, []string{"a"}},
	}
	for _, c := range cases {
		if got := templateRefs(t, c.text); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// A hostile template set stays within the bounds of the reading: a template
// of more actions than one is parsed with (whose parse costs as many
// variables as it declares times as many as it uses, and a stack as deep as
// its nesting) is not parsed, nor one past the actions of a plan; variables
// built on each other and an index of ever more keys give no path longer than
// maxRefSegments, and nesting past maxRefNesting is not walked.
func TestTemplateValuesPathsHostile(t *testing.T) {
	var vars strings.Builder
	vars.WriteString("{{ $v0 := .Values.a }}")
	for i := 1; i < maxTemplateActions/2; i++ {
		fmt.Fprintf(&vars, "{{ $v%d := $v%d.a }}", i, i-1)
	}
	index := "{{ index .Values" + strings.Repeat(` "a"`, 100_000) + " }}{{ index .Values" + strings.Repeat(` "b"`, maxRefSegments) + " }}"
	nested := strings.Repeat("{{ with .Values.n }}", 2*maxRefNesting) + strings.Repeat("{{ end }}", 2*maxRefNesting)
	tooMany := strings.Repeat("{{ $x := 1 }}", maxTemplateActions) + "{{ .Values.past }}"
	wide := strings.Repeat("{{ .Values.w }}", maxTemplateActions-1)

	budget := newRefBudget()
	got := map[string][][]string{}
	for _, tc := range []struct{ name, text string }{
		{"vars", vars.String()}, {"index", index}, {"nested", nested}, {"tooMany", tooMany},
	} {
		got[tc.name] = templateValuesPaths(tc.name, tc.text, &budget)
	}
	for name, paths := range got {
		for _, p := range paths {
			if len(p) > maxRefSegments {
				t.Errorf("%s: a path of %d segments, past the bound of %d", name, len(p), maxRefSegments)
			}
		}
	}
	if n := len(got["vars"]); n != maxRefSegments {
		t.Errorf("variables built on each other gave %d paths, want one per segment up to %d", n, maxRefSegments)
	}
	if p := got["index"]; len(p) != 1 || len(p[0]) != maxRefSegments {
		t.Errorf("index of ever more keys gave %v, want the path of %d b keys alone", p, maxRefSegments)
	}
	if n := len(got["nested"]); n == 0 || n > maxRefNesting {
		t.Errorf("with nested %d deep gave %d paths, want at most the %d walked", 2*maxRefNesting, n, maxRefNesting)
	}
	if p := got["tooMany"]; p != nil {
		t.Errorf("a template of more than %d actions was parsed: %v", maxTemplateActions, p)
	}
	for range budget.actions / (maxTemplateActions - 1) {
		if templateValuesPaths("wide", wide, &budget) == nil {
			t.Fatalf("a template within the actions left (%d) was not parsed", budget.actions)
		}
	}
	if p := templateValuesPaths("past", wide, &budget); p != nil {
		t.Errorf("a template past the actions of a plan was parsed: %v", p)
	}
}

// The templates of a subchart are read as the render has them: vendored under
// charts/ (a directory or an archive) and fetched as the Chart.lock pins
// them (failed before: a fetched one's were not read), each .Values.x under
// the key the parent gives it (its alias, else its name), .Values.global.x
// as global.x.
func TestChartRefsOfSubcharts(t *testing.T) {
	deployment := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: {{ .Chart.Name }}}\n" +
		"spec:\n  template:\n    metadata:\n      annotations: {{ toYaml .Values.podAnnotations | nindent 8 }}\n" +
		"    spec:\n      containers:\n        - name: c\n          image: {{ .Values.global.registry }}/{{ .Chart.Name }}\n"
	fetched := chartArchiveWith(t, "cache", map[string]string{
		"Chart.yaml":                "apiVersion: v2\nname: cache\nversion: 1.4.2\n",
		"templates/deployment.yaml": deployment,
	})
	vendored := chartArchiveWith(t, "queue", map[string]string{
		"Chart.yaml":                "apiVersion: v2\nname: queue\nversion: 0.1.0\n",
		"templates/deployment.yaml": deployment + "{{ $q := .Values.queue }}{{ $q.depth }}\n",
	})
	deps := []*chart.Dependency{{Name: "cache", Alias: "sessions", Version: "~1.4.0", Repository: "https://charts.example.com/stable"}}
	locked := []*chart.Dependency{{Name: "cache", Version: "1.4.2", Repository: "https://charts.example.com/stable"}}
	digest, err := lockDigest(deps, locked)
	if err != nil {
		t.Fatal(err)
	}
	repo := testtree.Write(t, map[string]string{
		"charts/shop/Chart.yaml": "apiVersion: v2\nname: shop\nversion: 0.3.0\ndependencies:\n" +
			"  - {name: cache, alias: sessions, version: ~1.4.0, repository: https://charts.example.com/stable}\n",
		"charts/shop/Chart.lock": "dependencies:\n- name: cache\n  repository: https://charts.example.com/stable\n  version: 1.4.2\n" +
			"digest: " + digest + "\ngenerated: \"2026-11-02T09:12:44.50121Z\"\n",
		"charts/shop/charts/queue-0.1.0.tgz":    vendored,
		"charts/shop/templates/deployment.yaml": "{{ .Values.image }}\n",
	})
	app := Application{Name: "shop", Path: "charts/shop", SourceType: SourceHelm, Namespace: "shop"}
	p, err := newPlanner(WithCharts(context.Background(), oneChart(fetched)), Request{RepoDir: repo, Apps: []Application{app},
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "cache"}, Change: Change{Replicas: &Replicas{Count: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range p.chartRefs("Deployment") {
		got = append(got, strings.Join(r.path, "."))
	}
	slices.Sort(got)
	got = slices.Compact(got)
	want := []string{"global.registry", "image", "queue.podAnnotations", "queue.queue", "queue.queue.depth", "sessions.podAnnotations"}
	if !slices.Equal(got, want) {
		t.Errorf("refs %v, want %v", got, want)
	}
}

// A define included with a values path as dot reads its fields under that path,
// from the file that includes it or another of the chart (_helpers.tpl), as Helm
// runs it (failed before: its body was read with the top of the data as dot
// alone, so {{ with .annotations }} named no key); the top or an unknown dot adds
// nothing beyond that reading, and a define including itself deeper stops at the
// longest path kept.
func TestChartValuesRefsDefineDot(t *testing.T) {
	helpers := `{{- define "web.annotations" }}{{ with .annotations }}{{ toYaml . }}{{ end }}{{ $.className }}{{ end }}` +
		`{{- define "web.nested" }}{{ include "web.annotations" .ingress }}{{ end }}` +
		`{{- define "web.self" }}{{ include "web.self" .next }}{{ end }}`
	var recursive []string
	for p := "a"; len(strings.Split(p, ".")) <= maxRefSegments; p += ".next" {
		recursive = append(recursive, p)
	}
	cases := []struct {
		name, text string
		want       []string
	}{
		{"include of a values path", `{{ include "web.annotations" .Values.ingress }}`,
			[]string{"ingress", "ingress.annotations", "ingress.className"}},
		{"template of a values path", `{{ template "web.annotations" .Values.ingress }}`,
			[]string{"ingress", "ingress.annotations", "ingress.className"}},
		{"through a variable", `{{ $i := .Values.ingress }}{{ include "web.annotations" $i | nindent 4 }}`,
			[]string{"ingress", "ingress.annotations", "ingress.className"}},
		{"through another define", `{{ include "web.nested" .Values }}`,
			[]string{"ingress", "ingress.annotations", "ingress.className"}},
		{"of the top", `{{ include "web.annotations" . }}`, nil},
		{"of an unknown dot", `{{ range .Values.hosts }}{{ include "web.annotations" . }}{{ end }}`, []string{"hosts"}},
		{"recursive", `{{ include "web.self" .Values.a }}`, recursive},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch := &chart.Chart{Metadata: &chart.Metadata{Name: "web"}, Templates: []*common.File{
				{Name: "templates/_helpers.tpl", Data: []byte(helpers)},
				{Name: "templates/ingress.yaml", Data: []byte("kind: Ingress\n" + tc.text)},
			}}
			budget := newRefBudget()
			var got []string
			for _, r := range chartValuesRefs(ch, nil, nil, "Ingress", &budget, 0) {
				got = append(got, strings.Join(r.path, "."))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("paths read = %q, want %q", got, tc.want)
			}
		})
	}
}

// sprig's get and dig of string keys read the path they name.
func TestTemplateValuesPathsGetAndDig(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
	}{
		{"get", `{{ get .Values.ingress "annotations" | toYaml }}`, []string{"ingress.annotations"}},
		{"dig", `{{ dig "ingress" "annotations" (dict) .Values | toYaml }}`, []string{"ingress.annotations"}},
		{"dig of a values path", `{{ dig "annotations" "" .Values.ingress }}`, []string{"ingress.annotations"}},
		{"dig with a default of values", `{{ dig "ingress" "annotations" .Values.defaults .Values }}`, []string{"defaults", "ingress.annotations"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := templateRefs(t, tc.text); !slices.Equal(got, tc.want) {
				t.Errorf("paths read = %q, want %q", got, tc.want)
			}
		})
	}
}
