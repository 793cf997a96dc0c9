package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
)

// helmDeployment is a chart template of Deployment web.
const helmDeployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {{ .Values.replicas }}\n"

// chartArchive is a vendored chart archive whose one template is size bytes of
// spaces: a few kilobytes that expand to size.
func chartArchive(t *testing.T, name string, size int) string {
	t.Helper()
	return chartArchiveWith(t, name, map[string]string{
		"Chart.yaml":             "apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n",
		"templates/padding.yaml": strings.Repeat(" ", size),
	})
}

// archivesOf is the files of a chart (Chart.yaml and charts/) whose charts/
// holds n copies of the chart archive inner.
func archivesOf(inner string, n int) map[string]string {
	files := map[string]string{"Chart.yaml": "apiVersion: v2\nname: outer\nversion: 0.1.0\n"}
	for i := range n {
		files[fmt.Sprintf("charts/pad-%d.tgz", i)] = inner
	}
	return files
}

// longNamesArchive is a chart archive of n empty files, each named by size
// bytes (a tar extended header holds a name of up to a megabyte): about a
// kilobyte a file, whatever the name's length. The entries are one written
// entry copied with its number changed, which only its extended header holds:
// writing each would take the tar writer a minute.
func longNamesArchive(t *testing.T, name string, n, size int) string {
	t.Helper()
	var entries bytes.Buffer
	tw := tar.NewWriter(&entries)
	meta := "apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n"
	if err := tw.WriteHeader(&tar.Header{Name: name + "/Chart.yaml", Mode: 0o644, Size: int64(len(meta))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(meta)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	head := entries.Len()
	const number = "00000.txt"
	if err := tw.WriteHeader(&tar.Header{Name: name + "/" + strings.Repeat("n", size-len(name)-len(number)-1) + number, Mode: 0o644, Format: tar.FormatPAX}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	entry := entries.Bytes()[head:]
	if bytes.Count(entry, []byte(number)) != 1 {
		t.Fatalf("the entry holds its number %d times, want once", bytes.Count(entry, []byte(number)))
	}
	var b bytes.Buffer
	gz, err := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	write := func(p []byte) {
		if _, err := gz.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	write(entries.Bytes()[:head])
	for i := range n {
		write(bytes.Replace(entry, []byte(number), fmt.Appendf(nil, "%05d.txt", i), 1))
	}
	write(make([]byte, 1024)) // the end of the archive
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// includeRing is a template whose n named templates each include the next, the
// last the first: Helm's limit of 1000 nested includes per name allows a
// million nested calls.
func includeRing(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{{ define "m%d" }}{{ include "m%d" . }}{{ end }}`, i, (i+1)%n)
	}
	b.WriteString(`{{ include "m0" . }}`)
	return b.String()
}

// doublingChain is n+1 named templates c0 … cn, each printing the one before it
// twice: no template includes itself, and cn prints 2^n times c0's 64 KiB.
func doublingChain(n int) string {
	var b strings.Builder
	b.WriteString(`{{ define "c0" }}` + strings.Repeat("x", 64<<10) + `{{ end }}`)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{{ define "c%d" }}{{ include "c%d" . }}{{ include "c%d" . }}{{ end }}`, i, i-1, i-1)
	}
	return b.String()
}

// hostileHelmMemory is the memory limit of the Helm workers of the plans of
// charts that run out of memory: the default's quarter, so that they reach it
// sooner.
const hostileHelmMemory = 128 << 20

// TestHostileChartsAreRefusedWithinBounds plans each hostile chart in a child
// process under the hard memory limit of the repository cases: each must end with
// a refusal naming the bound. The child's peak memory stays its own: a chart's
// templates run in a worker process under a limit of their own.
func TestHostileChartsAreRefusedWithinBounds(t *testing.T) {
	app := Application{Name: "web", Path: "chart", SourceType: SourceHelm, Namespace: "web", Helm: HelmOptions{ReleaseName: "web", ValueFiles: []string{"../env/values.yaml"}}}
	chart := func(extra map[string]string) func() map[string]string {
		return func() map[string]string {
			files := map[string]string{
				"chart/Chart.yaml":            "apiVersion: v2\nname: web\nversion: 0.1.0\n",
				"chart/values.yaml":           "replicas: 1\n",
				"chart/templates/deploy.yaml": helmDeployment,
				"env/values.yaml":             "replicas: 2\n",
			}
			for k, v := range extra {
				files[k] = v
			}
			return files
		}
	}
	cases := map[string]struct {
		files     func() map[string]string
		code      string
		reasonHas string
		// helmMemory, when set, is the memory limit of the Helm workers.
		helmMemory int64
	}{
		"alias bomb in a values file": {
			files: chart(map[string]string{"env/values.yaml": "replicas: 2\nbomb:\n" + aliasBomb("  ")}),
			code:  CodeAliasBomb, reasonHas: "env/values.yaml: document 1 (line 1): YAML aliases expand to more than 10000 nodes",
		},
		"alias bomb in the chart's defaults": {
			files: chart(map[string]string{"chart/values.yaml": "replicas: 1\nbomb:\n" + aliasBomb("  ")}),
			code:  CodeAliasBomb, reasonHas: "chart/values.yaml: document 1 (line 1): YAML aliases expand to more than 10000 nodes",
		},
		"a template that renders an alias bomb": {
			// The template holds no anchor itself: the bomb is in its output only.
			files: chart(map[string]string{"chart/templates/bomb.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\ndata:\n" +
				strings.ReplaceAll(aliasBomb("  "), "&", `{{ "\x26" }}`)}),
			// Helm parses each rendered manifest itself, and stops at the aliases.
			code: CodeRenderFailed, reasonHas: "YAML parse error on web/templates/bomb.yaml: error converting YAML to JSON: yaml: document contains excessive aliasing",
		},
		"repeat of a gigabyte": {
			files: chart(map[string]string{"chart/templates/big.yaml": "# {{ repeat 1000000000 \"x\" }}\n"}),
			code:  CodeRenderFailed, reasonHas: "repeat of 1000000000 times 1 bytes is more than the 16777216 bytes render allows",
		},
		"a loop over a billion numbers": {
			files: chart(map[string]string{"chart/templates/loop.yaml": "{{ range until 1000000000 }}x{{ end }}\n"}),
			code:  CodeRenderFailed, reasonHas: "a list of 1000000000 elements is more than the 100000 render allows",
		},
		"a vendored chart archive that expands to 64 MiB": {
			files: func() map[string]string {
				files := chart(nil)()
				files["chart/charts/pad-0.1.0.tgz"] = chartArchive(t, "pad", 64<<20)
				return files
			},
			code: CodeTooLarge, reasonHas: "chart/charts/pad-0.1.0.tgz: the chart archives of the render expand to more than 16777216 bytes",
		},
		"a vendored chart archive holding 16 archives that each expand to 64 MiB": {
			// Under a megabyte in the repository: Helm's loader expands each
			// archive of charts/ within an archive under a bound of its own.
			files: func() map[string]string {
				files := chart(nil)()
				files["chart/charts/outer-0.1.0.tgz"] = chartArchiveWith(t, "outer", archivesOf(chartArchive(t, "pad", 64<<20), 16))
				return files
			},
			code: CodeTooLarge, reasonHas: "outer/charts/pad-0.tgz in chart/charts/outer-0.1.0.tgz: the chart archives of the render expand to more than 16777216 bytes",
		},
		"a vendored chart archive of 1,000 empty files, each named by a megabyte": {
			files: func() map[string]string {
				files := chart(nil)()
				files["chart/charts/names-0.1.0.tgz"] = longNamesArchive(t, "names", 1000, 1<<20-64)
				return files
			},
			code: CodeTooLarge, reasonHas: "chart/charts/names-0.1.0.tgz: the chart archives of the render expand to more than 16777216 bytes",
		},
		"a chart of 3,000 files": {
			files: func() map[string]string {
				files := chart(nil)()
				for i := range 3000 {
					files[fmt.Sprintf("chart/files/f%04d.txt", i)] = "x\n"
				}
				return files
			},
			// Each file counts as a document of the render, so that bound comes first.
			code: CodeTooLarge, reasonHas: "the render reads more than 1000 YAML documents, at most 1000",
		},
		"a template that includes itself, printing what it includes twice": {
			files: chart(map[string]string{
				"chart/values.yaml":      "replicas: 1\nn: " + strings.Repeat("{a: ", 40) + "1" + strings.Repeat("}", 40) + "\n",
				"chart/templates/_d.tpl": `{{ define "double" }}{{ with .a }}{{ $s := include "double" . }}{{ $s }}{{ $s }}{{ else }}xxxxxxxx{{ end }}{{ end }}`,
				"chart/templates/d.yaml": `# {{ include "double" .Values.n }}`,
			}),
			code: CodeHelm, reasonHas: "its templates include each other recursively (double -> double)",
		},
		"templates that include each other in a ring of 200": {
			files: chart(map[string]string{"chart/templates/ring.yaml": includeRing(200)}),
			code:  CodeHelm, reasonHas: "its templates include each other recursively (m0 -> m1 -> m2 -> m3 -> m4 -> ... -> m0, a ring of 200 templates)",
		},
		"a template that calls itself": {
			files: chart(map[string]string{"chart/templates/self.yaml": `{{ define "self" }}{{ template "self" . }}{{ end }}{{ template "self" . }}`}),
			code:  CodeHelm, reasonHas: "(self -> self)",
		},
		// The two below pass the recursion check, so only the worker's memory
		// limit ends them; in process, they ended the process.
		"a template that includes itself by a name computed at render time, printing it twice": {
			files: chart(map[string]string{
				"chart/values.yaml":      "replicas: 1\nnest: " + strings.Repeat("{a: ", 40) + "{}" + strings.Repeat("}", 40) + "\n",
				"chart/templates/_d.tpl": `{{ define "double" }}{{ with .a }}{{ $name := print "dou" "ble" }}{{ $s := include $name . }}{{ $s }}{{ $s }}{{ else }}xxxxxxxx{{ end }}{{ end }}`,
				"chart/templates/d.yaml": `# {{ include "double" .Values.nest }}`,
			}),
			code: CodeTooLarge, reasonHas: "application web: chart chart: chart templates exceeded the 128 MiB memory limit of a Helm render",
			helmMemory: hostileHelmMemory,
		},
		"a value that tpl renders, rendering itself": {
			// Each level holds a megabyte, so the memory limit comes long before the deadline.
			files: chart(map[string]string{
				"chart/values.yaml":      "replicas: 1\nt: '{{ $mb := repeat 1048576 \"x\" }}{{ tpl .Values.t . }}{{ $mb }}'\n",
				"chart/templates/t.yaml": `# {{ tpl .Values.t . }}`,
			}),
			code: CodeTooLarge, reasonHas: "application web: chart chart: chart templates exceeded the 128 MiB memory limit of a Helm render",
			helmMemory: hostileHelmMemory,
		},
		"a chain of 20 templates, each printing the one before it twice": {
			files: chart(map[string]string{"chart/templates/_chain.tpl": doublingChain(20), "chart/templates/c.yaml": `# {{ include "c20" . }}`}),
			code:  CodeTooLarge, reasonHas: "application web: chart chart: chart templates exceeded the 128 MiB memory limit of a Helm render",
			helmMemory: hostileHelmMemory,
		},
		"a template that renders 18 MB": {
			files: chart(map[string]string{"chart/templates/wide.yaml": "# {{ range until 900 }}{{ repeat 20000 \"x\" }}{{ end }}\n"}),
			code:  CodeTooLarge, reasonHas: "chart chart renders more than 16777216 bytes, at most 16777216",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			repo := testtree.Write(t, tc.files())
			out := planSpecInChild(t, hostileSpec{Repo: repo, Apps: []Application{app}, HelmMemoryBytes: tc.helmMemory})
			if out.Code != tc.code || !strings.Contains(out.Reason, tc.reasonHas) {
				t.Fatalf("got %s\nwant refused (%s) with: %s", out.describe(), tc.code, tc.reasonHas)
			}
		})
	}
}
