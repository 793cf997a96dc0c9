package render

import (
	"context"
	"time"
)

// Observer is told of each Application render (a build of one source from one
// tree; renders shared between Applications of one source are told once), for
// metrics. Calls come from the rendering goroutine and must not block.
type Observer interface {
	// Rendered is a render of sourceType that took d and gave objects (0 when it
	// failed, err non-nil).
	Rendered(sourceType SourceType, d time.Duration, objects int, err error)
}

type observerKey struct{}

// WithObserver returns ctx carrying o: every render under ctx (Plan, Revert,
// Render) reports to it. The context carries it because renders run deep inside
// Plan and Revert and in the callbacks they are given, all of which get ctx.
func WithObserver(ctx context.Context, o Observer) context.Context {
	return context.WithValue(ctx, observerKey{}, o)
}

// observeRender reports a render that started at start to ctx's observer, if any.
func observeRender(ctx context.Context, app Application, start time.Time, objects int, err error) {
	if o, ok := ctx.Value(observerKey{}).(Observer); ok && o != nil {
		o.Rendered(app.SourceType, time.Since(start), objects, err)
	}
}
