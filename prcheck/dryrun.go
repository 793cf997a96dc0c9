package prcheck

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/policy"
	"github.com/kukie/kukie-gitops/render"
)

// DryRunner sends a team cluster's objects to it as a server-side dry-run and
// answers for each (clusteraccess.Clusters): a refusal per refused object, and
// clusteraccess.ErrClusterUnreachable when the cluster could not be asked.
type DryRunner interface {
	DryRunEach(ctx context.Context, ref clusteraccess.Ref, objects []map[string]any) ([]clusteraccess.DryRunRejection, error)
}

// Bounds of a pull request head's dry-run: at most MaxDryRunObjects changed
// objects a check, all sent within DryRunBudget, so a change reaching hundreds of
// apps costs their clusters a bounded number of requests and the check a bounded
// wait. Objects past them are listed as not sent.
const (
	MaxDryRunObjects = 50
	DryRunBudget     = 30 * time.Second
)

// Why a head's objects are not dry-run, as the kukie/policy summary says it.
const (
	noDryRunFork = "this pull request's head is a fork's branch: its objects could be anyone's, and the service does not send them " +
		"to a cluster with its credentials (admission webhooks run on a dry-run too); they are only rendered"
	noDryRunUnconfirmed = "GitHub could not say whether this pull request's head is a branch of the repository itself, " +
		"so its objects were only rendered, never sent to a cluster"
	noDryRunMergeGroup = "a merge group's head holds the commits of every pull request queued in it, forks' ones too, " +
		"so its objects are only rendered, never sent to a cluster"
	noDryRunAccess  = "the service has no cluster access to dry-run with"
	noDryRunChanges = "no object of the change is added or modified in a cluster"
)

// dryRunRefusal says why h's changed objects are not dry-run, or "" when they
// are: only a pull request whose head GitHub names a branch of the repository
// itself, the author one of those who may push to it. pr is the pull request as
// GitHub last said (nil when it could not be read, or for a merge group).
func (c *Checker) dryRunRefusal(h Head, pr *github.PullRequest) string {
	switch {
	case !strings.HasPrefix(h.Key, "pull/"):
		return noDryRunMergeGroup
	case h.Fork:
		return noDryRunFork
	case pr == nil:
		return noDryRunUnconfirmed
	case pr.HeadRepo != github.NormalizeFullName(h.Repo):
		return noDryRunFork
	case c.DryRun == nil:
		return noDryRunAccess
	}
	return ""
}

// dryRunCheck is the dry-run of one head's changed objects, shared by the workers
// that compare its apps: the count left and the time budget, which starts with the
// first object sent.
type dryRunCheck struct {
	runner DryRunner
	team   string
	parent context.Context

	mu   sync.Mutex
	left int
	// ctx ends when the budget is spent; nil until the first claim.
	ctx    context.Context
	cancel context.CancelFunc
}

func newDryRunCheck(ctx context.Context, runner DryRunner, team string) *dryRunCheck {
	return &dryRunCheck{runner: runner, team: team, parent: ctx, left: MaxDryRunObjects}
}

// stop releases the budget's timer.
func (d *dryRunCheck) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel != nil {
		d.cancel()
	}
}

// appDryRun is what one app's dry-run found.
type appDryRun struct {
	// sent objects were answered; refusals are those the cluster refused.
	sent     int
	refusals []policy.Refusal
	// leftOut objects were not sent: over the check's count or time.
	leftOut int
	// unreachable says why the cluster could not be asked.
	unreachable string
	// elsewhere is set for an app deploying to a cluster other than the one its
	// Application is read from: nothing of it is sent.
	elsewhere bool
	// cluster is the registered cluster the objects were sent to.
	cluster string
}

// claim takes up to n of the objects left to send, and the budget's context.
func (d *dryRunCheck) claim(n int) (int, context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n = min(n, d.left)
	d.left -= n
	if d.ctx == nil {
		d.ctx, d.cancel = context.WithTimeout(d.parent, DryRunBudget)
	}
	return n, d.ctx
}

// changed is a changed object to send: as rendered, and as applied (the
// destination namespace set where the render has none, as Argo CD applies it).
type changed struct {
	obj      render.Object
	manifest map[string]any
}

// run dry-runs app's added and modified objects (diffs, of the render after)
// against its cluster.
func (d *dryRunCheck) run(app render.Application, cluster string, after []render.Object, diffs []render.ObjectDiff) appDryRun {
	objs := changedObjects(app, after, diffs)
	out := appDryRun{cluster: cluster}
	if len(objs) == 0 {
		return out
	}
	n, ctx := d.claim(len(objs))
	out.leftOut = len(objs) - n
	if n == 0 {
		return out
	}
	objs = objs[:n]
	if ctx.Err() != nil {
		out.leftOut += n
		return out
	}
	manifests := make([]map[string]any, len(objs))
	masked := make([]render.ChangedObject, len(objs))
	for i, o := range objs {
		manifests[i] = o.manifest
		masked[i] = render.ChangedObject{App: app.Name, Object: o.manifest}
	}
	rejected, err := d.runner.DryRunEach(ctx, clusteraccess.Ref{TeamID: d.team, Name: cluster}, manifests)
	if err != nil {
		// The cluster's words may quote the objects sent, Secret values included.
		out.unreachable = render.MaskText(masked, err.Error())
		return out
	}
	out.sent = n
	for _, r := range rejected {
		if r.Index < 0 || r.Index >= len(objs) {
			continue
		}
		out.refusals = append(out.refusals, policy.Refusal{Object: objs[r.Index].obj, Fields: r.Fields, Message: render.MaskText(masked, r.Message)})
	}
	return out
}

// changedObjects are the objects of after that diffs add or modify, in the diffs'
// order.
func changedObjects(app render.Application, after []render.Object, diffs []render.ObjectDiff) []changed {
	type id struct{ group, kind, namespace, name string }
	idOf := func(apiVersion, kind, namespace, name string) id {
		group, _, ok := strings.Cut(apiVersion, "/")
		if !ok {
			group = ""
		}
		return id{group, kind, namespace, name}
	}
	byID := map[id]render.Object{}
	for _, o := range after {
		apiVersion, _ := o.Manifest["apiVersion"].(string)
		kind, _ := o.Manifest["kind"].(string)
		meta, _ := o.Manifest["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		ns, _ := meta["namespace"].(string)
		if ns == "" && !render.ClusterScoped(apiVersion, kind) {
			ns = app.Namespace
		}
		byID[idOf(apiVersion, kind, ns, name)] = o
	}
	var out []changed
	for _, d := range diffs {
		if d.Action == "removed" {
			continue
		}
		o, ok := byID[idOf(d.APIVersion, d.Kind, d.Namespace, d.Name)]
		if !ok {
			continue
		}
		out = append(out, changed{obj: o, manifest: applied(o.Manifest, d.Namespace)})
	}
	return out
}

// applied is m in namespace ns when it names none: a shallow copy, since the
// render's manifests are shared.
func applied(m map[string]any, ns string) map[string]any {
	meta, _ := m["metadata"].(map[string]any)
	if have, _ := meta["namespace"].(string); have != "" || ns == "" {
		return m
	}
	out := maps.Clone(m)
	meta = maps.Clone(meta)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["namespace"] = ns
	out["metadata"] = meta
	return out
}

// dryRunOutcome adds the head's dry-run to pol: the refusals are findings already
// (each app's); what was sent, left out or could not be asked is the outcome.
func (r *report) dryRunOutcome(pol *policy.Report) {
	var sent, refused, leftOut int
	var elsewhere []string
	unreachable := map[string]string{}
	for _, a := range r.apps {
		if a.dryRun.elsewhere {
			elsewhere = append(elsewhere, a.name)
		}
		sent += a.dryRun.sent
		refused += len(a.dryRun.refusals)
		leftOut += a.dryRun.leftOut
		if a.dryRun.unreachable != "" {
			unreachable[a.dryRun.cluster] = a.dryRun.unreachable
		}
	}
	if sent == 0 && leftOut == 0 && len(unreachable) == 0 {
		pol.DryRunAbsent, pol.DryRunNotSent = noDryRunChanges, elsewhere
		return
	}
	var notes []string
	if sent > 0 {
		notes = append(notes, fmt.Sprintf("%d changed objects sent, %d refused", sent, refused))
	}
	if leftOut > 0 {
		notes = append(notes, fmt.Sprintf("%d not sent: a check sends at most %d objects, within %s", leftOut, MaxDryRunObjects, DryRunBudget))
	}
	for _, c := range slices.Sorted(maps.Keys(unreachable)) {
		notes = append(notes, fmt.Sprintf("cluster %s could not be asked: %s", c, oneLine(unreachable[c])))
	}
	if len(elsewhere) > 0 {
		notes = append(notes, policy.NotSent(elsewhere, func(s string) string { return s }))
	}
	note := strings.Join(notes, "; ")
	if len(unreachable) > 0 {
		pol.AddDryRun(policy.DryRun{Outcome: policy.DryRunUnreachable, Note: note})
	}
	switch {
	case refused > 0:
		pol.DryRun = &policy.DryRun{Outcome: policy.DryRunRejected, Note: note}
	case len(unreachable) == 0 && leftOut > 0 && sent == 0:
		pol.DryRun = &policy.DryRun{Outcome: policy.DryRunSkipped, Note: note}
	case len(unreachable) == 0:
		pol.DryRun = &policy.DryRun{Outcome: policy.DryRunPassed, Note: note}
	}
}
