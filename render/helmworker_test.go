package render

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/render/helmexec"
)

// TestHelmRenderPastItsTimeoutStopsItsWorker: a chart whose templates run on
// (a loop of 10^15 steps) is refused at the render timeout, and its worker is
// killed then, not left running: the pool's one worker slot is free for the next
// render at once, which gets a new worker and renders.
func TestHelmRenderPastItsTimeoutStopsItsWorker(t *testing.T) {
	pool := helmexec.New(helmexec.Config{Workers: 1})
	defer pool.Close()
	ctx := WithHelmWorkers(context.Background(), pool)
	app := Application{Name: "web", Path: "chart", SourceType: SourceHelm, Namespace: "web"}
	chart := func(template string) string {
		return testtree.Write(t, map[string]string{
			"chart/Chart.yaml":          "apiVersion: v2\nname: web\nversion: 0.1.0\n",
			"chart/templates/web.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n",
			"chart/templates/more.yaml": template,
		})
	}
	saved := timeout.Load()
	t.Cleanup(func() { timeout.Store(saved) })
	timeout.Store(int64(300 * time.Millisecond))
	_, err := Render(ctx, chart(`{{ range until 100000 }}{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}{{ end }}`), app)
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Code != CodeTimeout {
		t.Fatalf("got %v, want a %s refusal", err, CodeTimeout)
	}
	timeout.Store(int64(10 * time.Minute))
	objs, err := Render(ctx, chart(""), app)
	if err != nil || len(objs) != 1 {
		t.Fatalf("the render after: %d objects, %v", len(objs), err)
	}
	if n := pool.Started(); n != 2 {
		t.Fatalf("%d workers started, want 2: the first one's render was stopped", n)
	}
}
