package cache

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/render"
)

// Commit names one commit of a repository ("owner/name"). A tree read at a commit
// renders the same every time, so renders are reused by it.
type Commit struct {
	Repo string
	SHA  string
}

// RenderEngine plans and reverts changes with package render (the pipeline's
// plan.Renderer), reusing the renders of unchanged trees by commit.
type RenderEngine struct {
	// Renders, when set, keeps the before-render of each app at each commit, so a
	// second plan on the same commit (another change, a retry, a re-prepare) does
	// not build the unchanged tree again. Every edited tree is still rendered fresh.
	Renders *Renders
	// Observer, when set, is told of every Application render, for metrics.
	Observer render.Observer
	// Charts, when set, fetches the chart dependencies a Chart.lock pins that
	// are not vendored, and the charts Applications deploy from Helm
	// repositories (see render.WithCharts); without it such a chart is refused.
	Charts render.ChartSource
}

// Plan plans req, whose RepoDir holds the tree of the commit at.
func (e RenderEngine) Plan(ctx context.Context, at Commit, req render.Request) (*render.Result, error) {
	ctx = e.observed(ctx)
	if e.Renders != nil && at.Repo != "" && at.SHA != "" {
		req.BeforeRender = e.cachedBefore(at, req.RepoDir)
	}
	return render.Plan(ctx, req)
}

// Revert undoes an earlier change made on the commit original, on the tree of at
// in req.RepoDir (req.OriginalDir holds the tree of original).
func (e RenderEngine) Revert(ctx context.Context, at, original Commit, req render.RevertRequest) (*render.Result, error) {
	ctx = e.observed(ctx)
	if e.Renders != nil && at.Repo != "" && at.SHA != "" {
		req.BeforeRender = e.cachedBefore(at, req.RepoDir)
	}
	if e.Renders != nil && original.Repo != "" && original.SHA != "" {
		req.OriginalRender = e.cachedBefore(original, req.OriginalDir)
	}
	return render.Revert(ctx, req)
}

// Render implements Renderer.
func (e RenderEngine) Render(ctx context.Context, at Commit, dir string, app render.Application) ([]render.Object, error) {
	ctx = e.observed(ctx)
	if e.Renders != nil && at.Repo != "" && at.SHA != "" {
		return e.cachedBefore(at, dir)(ctx, app)
	}
	return render.Render(ctx, dir, app)
}

// observed is ctx carrying the engine's observer and chart source, if it has
// them.
func (e RenderEngine) observed(ctx context.Context) context.Context {
	if e.Charts != nil {
		ctx = render.WithCharts(ctx, e.Charts)
	}
	if e.Observer == nil {
		return ctx
	}
	return render.WithObserver(ctx, e.Observer)
}

// cachedBefore renders apps of the tree of at (in dir) through the cache. A cache
// entry that cannot be read is rendered again, never trusted.
func (e RenderEngine) cachedBefore(at Commit, dir string) func(context.Context, render.Application) ([]render.Object, error) {
	return func(ctx context.Context, app render.Application) ([]render.Object, error) {
		key := RenderKey(at.Repo, at.SHA, app.Path, app.SourceID())
		if data, ok := e.Renders.Load(key); ok {
			objs, err := render.DecodeObjects(data)
			if err == nil {
				return objs, nil
			}
			zerolog.Ctx(ctx).Warn().Err(err).Str("repo", at.Repo).Str("sha", at.SHA).Str("app", app.Name).Msg("Cached render unreadable; rendering again")
		}
		objs, err := render.Render(ctx, dir, app)
		if err != nil {
			return nil, err
		}
		data, err := render.EncodeObjects(objs)
		if err == nil {
			err = e.Renders.Store(key, data)
		}
		if err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("repo", at.Repo).Str("app", app.Name).Msg("Render not cached")
		}
		return objs, nil
	}
}
