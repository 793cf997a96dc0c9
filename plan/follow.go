package plan

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/store"
)

// ApplicationFollower is a Cluster that reports an Application's changes as they
// happen (clusteraccess.Clusters does, from one shared watch on Applications per
// cluster). A deploying plan is then checked again at each change of its
// Application, read as the watch saw it.
type ApplicationFollower interface {
	FollowApplication(ctx context.Context, cluster clusteraccess.Ref, namespace, name string) (clusteraccess.FollowedApplication, error)
}

// ObjectFollower is a Cluster that reports a live object's changes as they happen
// (clusteraccess.Clusters does, from a watch of that object alone, shared by the
// plans deploying it). A deploying plan is then checked again at each change of its
// target, whose rollout is judged (kstatus) on the object read at that moment.
type ObjectFollower interface {
	FollowObject(ctx context.Context, cluster clusteraccess.Ref, target objref.Target) (clusteraccess.Followed, error)
}

// following is a run's follow of its plan's deployment: its Application and its
// target, each watched or, when that cannot be, polled every Config.DeployPoll.
type following struct {
	app    clusteraccess.FollowedApplication // nil: polled
	target clusteraccess.Followed            // nil: polled
	// notes say what is polled and why; each is recorded once in the plan's history.
	notes []string
	// refused is the cluster's refusal of the watches' credentials last noted,
	// "" while they follow.
	refused string
	// contains remembers GitHub's answers on whether a synced revision includes the
	// merge commit: ancestry does not change, and a rollout brings many checks.
	contains map[string]bool
}

func (f *following) stop() {
	if f.app != nil {
		f.app.Stop()
	}
	if f.target != nil {
		f.target.Stop()
	}
}

// polled reports whether something of the deployment is polled: it cannot be
// watched, or the cluster refuses the credentials of its watch.
func (f *following) polled() bool { return f.app == nil || f.target == nil || f.refusal() != "" }

// application returns the plan's Application as its watch last saw it, if watched
// and the watch follows.
func (f *following) application() (argocd.Application, bool) {
	if f == nil || f.app == nil || f.app.Err() != nil {
		return argocd.Application{}, false
	}
	return f.app.Latest()
}

// refusal is why the cluster refuses the credentials of a watch of the deployment
// (the first that says so), "" while they are accepted.
func (f *following) refusal() string {
	if f.app != nil {
		if err := f.app.Err(); err != nil {
			return err.Error()
		}
	}
	if f.target != nil {
		if err := f.target.Err(); err != nil {
			return err.Error()
		}
	}
	return ""
}

// noteRefusal adds a note to the plan's history when the cluster starts or stops
// refusing the watches' credentials: while it does, the deployment is polled (and
// fails at its deadline if the polls cannot read it either, as any unreadable
// deployment), and followed by watch again once they are accepted (a new kubeconfig,
// rights given back).
func (f *following) noteRefusal(poll string) {
	r := f.refusal()
	if r == f.refused {
		return
	}
	if r != "" {
		f.notes = append(f.notes, "cluster credentials were rejected: "+r+"; following the deployment by polling every "+poll+" until the cluster accepts them again")
	} else {
		f.notes = append(f.notes, "cluster credentials are accepted again; following the deployment by watch")
	}
	f.refused = r
}

// followDeploy returns the run's follow of the plan's deployment, starting it at the
// run's first check; it ends with the run (endFollow). What cannot be watched is
// polled, which the plan's history says once per run: a note that could not be
// recorded (the plan changed meanwhile) is recorded at the next check.
func (p *Pipeline) followDeploy(ctx context.Context, pl store.Plan, pay Payload) (store.Plan, *following, error) {
	p.mu.Lock()
	f, ok := p.follows[pl.Code]
	p.mu.Unlock()
	if !ok {
		f = p.startFollow(ctx, pl, pay)
		p.mu.Lock()
		if p.follows == nil {
			p.follows = map[string]*following{}
		}
		p.follows[pl.Code] = f
		p.mu.Unlock()
	}
	f.noteRefusal(p.cfg.DeployPoll.String())
	for len(f.notes) > 0 {
		saved, err := p.save(ctx, pl, pay, StatusDeploying, "system", "deploy", f.notes[0])
		if err != nil {
			return pl, f, err
		}
		pl, f.notes = saved, f.notes[1:]
	}
	return pl, f, nil
}

// startFollow watches the plan's Application and target where the cluster can.
func (p *Pipeline) startFollow(ctx context.Context, pl store.Plan, pay Payload) *following {
	f := &following{contains: map[string]bool{}}
	poll := p.cfg.DeployPoll.String()
	if follower, can := p.cluster.(ApplicationFollower); can && pay.App != nil {
		app, err := follower.FollowApplication(ctx, clusterOf(pl), pay.App.Namespace, pay.App.Name)
		if err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("plan", pl.Code).Msg("Cannot watch the Application; polling it")
			f.notes = append(f.notes, "following Argo CD by polling every "+poll+": the Application cannot be watched: "+err.Error())
		} else {
			f.app = app
		}
	}
	if follower, can := p.cluster.(ObjectFollower); can {
		t := deployTarget(pl, pay)
		target, err := follower.FollowObject(ctx, clusterOf(pl), t)
		if err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("plan", pl.Code).Msg("Cannot watch the target; polling it")
			f.notes = append(f.notes, "checking the rollout of "+t.Kind+"/"+t.Name+" by polling every "+poll+": it cannot be watched: "+err.Error())
		} else {
			f.target = target
		}
	}
	return f
}

// awaitChange waits until the deployment may have moved: a change of the watched
// Application or target, the poll interval when something is polled or the last
// check could not read everything, or the deploy deadline. false means ctx ended.
func (f *following) awaitChange(ctx context.Context, poll time.Duration, retry bool, deadline time.Time) bool {
	var appChanges, targetChanges <-chan struct{}
	if f.app != nil {
		appChanges = f.app.Changes()
	}
	if f.target != nil {
		targetChanges = f.target.Changes()
	}
	var tick <-chan time.Time
	if f.polled() || retry {
		t := time.NewTimer(poll)
		defer t.Stop()
		tick = t.C
	}
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-appChanges:
	case <-targetChanges:
	case <-tick:
	case <-timeout.C:
	}
	return true
}

// endFollow ends the run's follow of the plan's deployment, if any.
func (p *Pipeline) endFollow(code string) {
	p.mu.Lock()
	f, ok := p.follows[code]
	delete(p.follows, code)
	p.mu.Unlock()
	if ok {
		f.stop()
	}
}
