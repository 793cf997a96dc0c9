package render

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/internal/testtree"
)

type renderRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *renderRecorder) Rendered(sourceType SourceType, d time.Duration, objects int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d < 0 {
		panic("negative render duration")
	}
	r.seen = append(r.seen, fmt.Sprintf("%s %d %v", sourceType, objects, err != nil))
}

func TestRendersAreObservedBySourceType(t *testing.T) {
	repo := testtree.Write(t, map[string]string{
		"plain/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
		"kust/kustomization.yaml":  "resources:\n- cm.yaml\n",
		"kust/cm.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
		"chart/Chart.yaml":         "name: c\nversion: 0.1.0\n",
		"chart/templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
		"broken/Chart.yaml":        "name: broken\nversion: 0.1.0\n",
		"broken/templates/cm.yaml": "{{ fail \"no\" }}\n",
	})
	rec := &renderRecorder{}
	ctx := WithObserver(context.Background(), rec)
	for _, app := range []Application{
		{Name: "plain", Path: "plain", SourceType: SourceDirectory},
		{Name: "kust", Path: "kust", SourceType: SourceKustomize},
		{Name: "chart", Path: "chart", SourceType: SourceHelm},
		{Name: "broken", Path: "broken", SourceType: SourceHelm},
	} {
		_, _ = Render(ctx, repo, app)
	}
	// Without an observer nothing is reported, and the render still works.
	if objs, err := Render(context.Background(), repo, Application{Name: "plain", Path: "plain", SourceType: SourceDirectory}); err != nil || len(objs) != 2 {
		t.Fatalf("render without an observer: %d objects, %v", len(objs), err)
	}
	want := fmt.Sprint([]string{"Directory 2 false", "Kustomize 1 false", "Helm 1 false", "Helm 0 true"})
	if got := fmt.Sprint(rec.seen); got != want {
		t.Fatalf("observed %s, want %s", got, want)
	}
}
