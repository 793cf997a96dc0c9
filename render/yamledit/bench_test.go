package yamledit

import (
	"fmt"
	"strings"
	"testing"
)

// thirtyDocuments is a file of 30 Deployments, like a generated all-in-one manifest.
func thirtyDocuments() []byte {
	var b strings.Builder
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&b, `---
# deployment %[1]d
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d
  labels:
    app: app-%[1]d
spec:
  replicas: 2
  selector:
    matchLabels:
      app: app-%[1]d
  template:
    metadata:
      labels:
        app: app-%[1]d
    spec:
      containers:
      - name: app
        image: "registry.example.com/app-%[1]d:1.0.0"
        env:
        - name: LOG_LEVEL
          value: info
        - name: DB_PASSWORD
          valueFrom:
            secretKeyRef: {name: db, key: password}
        resources:
          requests:
            cpu: 100m
            memory: 128Mi
`, i)
	}
	return []byte(b.String())
}

func BenchmarkEditReplicas30Documents(b *testing.B) {
	src := thirtyDocuments()
	op := Set(Path{K("spec"), K("replicas")}, 3)
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, _, err := Edit(src, 29, op); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEditEnvInsert(b *testing.B) {
	src := thirtyDocuments()
	op := Set(Path{K("spec"), K("template"), K("spec"), K("containers"), M("name", "app"), K("env"), M("name", "FEATURE"), K("value")}, "true")
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, _, err := Edit(src, 15, op); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDocuments30(b *testing.B) {
	src := thirtyDocuments()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Documents(src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDocumentsWideMapping reads one mapping of 5,000 keys (the most render
// lets through) and edits one of them: the duplicate-key check and the read-back
// comparison look keys up by map, not key by key.
func BenchmarkDocumentsWideMapping(b *testing.B) {
	src := []byte("data:\n" + strings.ReplaceAll(wideMapping(5_000), "key", "  key"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Documents(src); err != nil {
			b.Fatal(err)
		}
		if _, _, err := Edit(src, 0, Set(Path{K("data"), K("key2500")}, "changed")); err != nil {
			b.Fatal(err)
		}
	}
}
