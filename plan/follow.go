package plan

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/store"
)

// ApplicationFollower is a Cluster that reports an Application's changes as they
// happen (clusteraccess.Clusters does, from one shared watch per cluster). A deploying
// plan is then checked again at each change of its Application, and the poll every
// Config.DeployPoll is only the fallback.
type ApplicationFollower interface {
	FollowApplication(ctx context.Context, cluster clusteraccess.Ref, namespace, name string) (<-chan struct{}, func(), error)
}

// following is a run's follow of its plan's Application.
type following struct {
	changes <-chan struct{} // nil: polling
	stop    func()
}

// followDeploy returns the channel on which the plan's Application reports changes,
// following it at the run's first check of the deployment; the follow ends with the
// run (endFollow). When the cluster cannot be followed, the plan is polled, which its
// history says once per run; the channel is then nil.
func (p *Pipeline) followDeploy(ctx context.Context, pl store.Plan, pay Payload) (store.Plan, <-chan struct{}) {
	p.mu.Lock()
	f, ok := p.follows[pl.Code]
	p.mu.Unlock()
	if ok {
		return pl, f.changes
	}
	follower, can := p.cluster.(ApplicationFollower)
	if !can || pay.App == nil {
		return pl, nil
	}
	changes, stop, err := follower.FollowApplication(ctx, clusterOf(pl), pay.App.Namespace, pay.App.Name)
	f = &following{changes: changes, stop: stop}
	if err != nil {
		f = &following{stop: func() {}}
		zerolog.Ctx(ctx).Warn().Err(err).Str("plan", pl.Code).Msg("Cannot watch the Application; polling it")
		msg := "following Argo CD by polling every " + p.cfg.DeployPoll.String() + ": the Application cannot be watched: " + err.Error()
		if saved, serr := p.save(ctx, pl, pay, StatusDeploying, "system", "deploy", msg); serr == nil {
			pl = saved
		}
	}
	p.mu.Lock()
	if p.follows == nil {
		p.follows = map[string]*following{}
	}
	p.follows[pl.Code] = f
	p.mu.Unlock()
	return pl, f.changes
}

// endFollow ends the run's follow of the plan's Application, if any.
func (p *Pipeline) endFollow(code string) {
	p.mu.Lock()
	f, ok := p.follows[code]
	delete(p.follows, code)
	p.mu.Unlock()
	if ok {
		f.stop()
	}
}
