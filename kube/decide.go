package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/argocd"
)

// Decide chooses the Git or direct path for a change of targets. It examines the
// first Options.MaxTargets targets and reads them and the cluster's Applications in
// parallel within Options.DecisionBudget (each call within min(CallTimeout, what is
// left)). It never fails: reads that fail or run out of time make the decision unknown
// (Known=false, PathDirect) with the failure's class and a reason a person can act on.
func (c *Cluster) Decide(ctx context.Context, targets []argocd.ResourceRef) (d argocd.Decision) {
	defer func() {
		// The decision must never take its caller down: a bug anywhere in it yields
		// an unknown decision instead.
		if r := recover(); r != nil {
			zerolog.Ctx(ctx).Error().Interface("panic", r).Msg("Path decision panicked")
			d = argocd.Decision{
				Path: argocd.PathDirect, Known: false, Level: argocd.LevelUnknown, Failure: argocd.FailureOther,
				Reason: fmt.Sprintf("The path is unknown, so no pull request is made: the decision failed with an internal error (%v); retry, and report it if it persists.", r),
			}
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, c.opts.DecisionBudget)
	defer cancel()

	examined, skipped := targets, 0
	if len(targets) > c.opts.MaxTargets {
		examined, skipped = targets[:c.opts.MaxTargets], len(targets)-c.opts.MaxTargets
	}
	in := argocd.DecideInput{Targets: make([]argocd.TargetRead, len(examined)), Skipped: skipped, Options: c.opts.Argo}

	var wg sync.WaitGroup
	wg.Go(func() {
		defer recoverInto(ctx, "read applications", func(e *argocd.ReadError) { in.AppsErr = e })
		snap, err := c.applications(ctx, Cached)
		if err != nil {
			in.AppsErr = readError(err)
			return
		}
		in.Apps = snap.index
	})
	for i, ref := range examined {
		wg.Go(func() {
			defer recoverInto(ctx, "read "+ref.String(), func(e *argocd.ReadError) { in.Targets[i] = argocd.TargetRead{Ref: ref, Err: e} })
			in.Targets[i] = c.readTarget(ctx, ref)
		})
	}
	wg.Wait()

	if in.Apps != nil && namesMissingApp(in.Targets, in.Apps, c.opts.Argo) {
		// The list may predate an Application created since (up to CacheTTL ago). A
		// Refresh read re-lists only when the cached list is older than RefreshFloor
		// and collapses concurrent misses onto one call, so a flood of decisions
		// naming an Application that does not exist costs one list per RefreshFloor.
		// When the re-read fails, the cached list still stands.
		if snap, err := c.applications(ctx, Refresh); err == nil {
			in.Apps = snap.index
		} else {
			zerolog.Ctx(ctx).Debug().Err(err).Str("cluster", c.name).Msg("Re-reading Applications for a missing one failed; deciding on the cached list")
		}
	}

	d = argocd.Decide(in)
	zerolog.Ctx(ctx).Debug().Str("cluster", c.name).Str("path", string(d.Path)).Bool("known", d.Known).
		Str("level", string(d.Level)).Str("failure", string(d.Failure)).Msg("Path decided")
	return d
}

func (c *Cluster) readTarget(ctx context.Context, ref argocd.ResourceRef) argocd.TargetRead {
	obj, full, err := c.getResource(ctx, ref, Cached)
	switch {
	case err == nil:
		return argocd.TargetRead{Ref: full, Resource: &argocd.Resource{Ref: full, Labels: obj.GetLabels(), Annotations: obj.GetAnnotations()}}
	case ClassOf(err) == argocd.FailureNotFound:
		// The object, its namespace or its kind does not exist (yet).
		return argocd.TargetRead{Ref: full, Missing: true}
	default:
		return argocd.TargetRead{Ref: full, Err: readError(err)}
	}
}

// namesMissingApp reports whether a target's Argo CD mark names an Application that
// apps does not hold: a trusted tracking annotation whose Application is not found, or
// an instance label naming no Application. Annotations of another Argo CD instance
// (installation id differs from the configured one) are expected to be absent here.
func namesMissingApp(targets []argocd.TargetRead, apps *argocd.AppIndex, opts argocd.Options) bool {
	labelKey := opts.InstanceLabelKey
	if labelKey == "" {
		labelKey = argocd.DefaultInstanceLabel
	}
	for _, t := range targets {
		res := t.Resource
		if res == nil {
			continue
		}
		o := argocd.Own(*res, apps, opts)
		if o.By == argocd.EvidenceAnnotation {
			otherInstance := opts.InstallationID != "" && res.Annotations[argocd.InstallationIDAnnotation] != opts.InstallationID
			if o.Application == nil && !otherInstance && !holds(apps, o.App) {
				return true
			}
			continue
		}
		if v := res.Labels[labelKey]; v != "" {
			if app, _ := apps.Resolve(v, res.Ref, opts.ControlPlaneNamespace); app == nil {
				return true
			}
		}
	}
	return false
}

// holds reports whether apps has the Application key names; a key without namespace
// (an ambiguous or unknown name in Argo CD's own namespace) is never held.
func holds(apps *argocd.AppIndex, key argocd.AppKey) bool {
	if key.Namespace == "" {
		return false
	}
	_, ok := apps.Get(key)
	return ok
}

func readError(err error) *argocd.ReadError {
	re := &argocd.ReadError{Class: ClassOf(err), Detail: err.Error()}
	if errors.Is(err, errNoNamespace) {
		re.Remedy = "name the target's namespace and ask again"
	}
	return re
}

// recoverInto turns a panic of one read into a failed read, so a bug in reading one
// target cannot take the decision, or the process, down with it.
func recoverInto(ctx context.Context, what string, set func(*argocd.ReadError)) {
	if r := recover(); r != nil {
		zerolog.Ctx(ctx).Error().Str("read", what).Interface("panic", r).Msg("Cluster read panicked")
		set(&argocd.ReadError{Class: argocd.FailureOther, Detail: fmt.Sprintf("internal error: %v", r)})
	}
}
