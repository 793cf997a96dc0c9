package helmexec

import (
	"context"
	"testing"

	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// benchChart renders 30 ConfigMaps from a range over the values.
func benchChart(b *testing.B) (*chart.Chart, map[string]any) {
	b.Helper()
	ch := testChart(b, map[string]string{"cms.yaml": `{{- range $i := until 30 }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $.Release.Name }}-{{ $i }}
  labels:
    {{- toYaml $.Values.labels | nindent 4 }}
data:
  index: {{ $i | quote }}
{{- end }}
`})
	return ch, map[string]any{"labels": map[string]any{"team": "shop", "tier": "web"}}
}

// BenchmarkRenderInProcess is Helm's own cost of the chart, without a worker.
func BenchmarkRenderInProcess(b *testing.B) {
	ch, vals := benchChart(b)
	for b.Loop() {
		if _, err := runTemplate(request{Chart: toWire(ch), Values: vals, Options: testOptions}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderInWorker is the same render through a warm worker: the
// difference is what a worker adds (encoding, the pipe, decoding).
func BenchmarkRenderInWorker(b *testing.B) {
	ch, vals := benchChart(b)
	p := New(Config{Workers: 1})
	defer p.Close()
	for b.Loop() {
		if _, err := p.Render(context.Background(), ch, vals, testOptions); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWorkerStart is what a render pays when no worker is warm: a process
// start of the test binary to its ready frame.
func BenchmarkWorkerStart(b *testing.B) {
	p := New(Config{Workers: 1})
	defer p.Close()
	for b.Loop() {
		w, err := p.start(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		w.stop()
	}
}
