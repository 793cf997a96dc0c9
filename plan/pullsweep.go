package plan

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/github"
)

// PullSweep counts what one SweepPulls did with the plans it found due.
type PullSweep struct {
	// Open is how many pull requests were read and are still open; GitHub
	// answers an unchanged one 304 Not Modified to the client's cached ETag.
	Open int
	// Found is how many of them GitHub reported merged or closed while their plan
	// was still pr_open: their event never reached the service.
	Found int
	// Failed is how many reads (or moves after them) failed; RateLimited how many
	// were not made or failed for GitHub's rate limit. Either is read again at the
	// next sweep.
	Failed, RateLimited int
}

// maxPullSweep bounds the plans one sweep reads; the least recently read go first,
// so a longer list is read over the next sweeps.
const maxPullSweep = 1000

// pullSweepLearnt ends the history's entry of a plan the sweep moved.
const pullSweepLearnt = ", found by the periodic check of open pull requests: its pull_request event never reached the service"

// SweepPulls reads, as at now, the pull request of every pr_open plan that no
// replica read within the last Config.PullSweepInterval, and moves a plan whose
// pull request GitHub reports merged or closed as that pull_request event does
// (PullClosed: history, released files, branch deleted, the merge followed to the
// cluster), saying in the history that the periodic check found it. GitHub does not
// deliver again an event the service missed (it was down, the network dropped it),
// and such a plan stayed pr_open for ever, holding its files.
//
// Each plan's read is claimed in the store first, so of the replicas sweeping at
// once one reads it, once an interval, across restarts. Reads go through the
// installation's client: its cache makes them conditional, and its budget keeps
// them within GitHub's limits. A read that fails or is rate limited changes
// nothing and is tried at the next sweep; after a rate limit, no more of that
// installation's pull requests are read in this sweep. Only a failure to list the
// plans is returned; the rest is logged and counted.
func (p *Pipeline) SweepPulls(ctx context.Context, now time.Time) (PullSweep, error) {
	var res PullSweep
	before := now.Add(-p.cfg.PullSweepInterval)
	plans, err := p.db.PullSweepDue(ctx, []string{string(StatusPROpen)}, before, maxPullSweep)
	if err != nil {
		return res, fmt.Errorf("list plans whose pull request is due a read: %w", err)
	}
	defer func() { p.observer.PullSweep(res) }()
	log := zerolog.Ctx(ctx)
	limited := map[int64]bool{}
	for _, pl := range plans {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if limited[pl.InstallationID] {
			res.RateLimited++
			continue
		}
		claimed, err := p.db.ClaimPullSweep(ctx, pl.Code, string(StatusPROpen), now, before)
		if err != nil {
			res.Failed++
			log.Error().Err(err).Str("plan", pl.Code).Msg("Claiming the read of the plan's pull request failed")
			continue
		}
		if !claimed {
			continue // another replica reads it, or the plan moved on since the list
		}
		pr, err := p.repos.GetPull(ctx, pl.InstallationID, pl.Repo, pl.PRNumber)
		if err != nil {
			if _, ok := github.RetryAt(err, time.Now()); ok {
				limited[pl.InstallationID] = true
				res.RateLimited++
			} else {
				res.Failed++
			}
			log.Warn().Err(err).Str("plan", pl.Code).Int64("installation", pl.InstallationID).
				Msg("Reading the plan's pull request failed; it is read again at the next sweep")
			continue
		}
		if pr.State == "open" && !pr.Merged {
			res.Open++
			continue
		}
		if err := p.pullClosed(ctx, pl.Repo, pl.Branch, pr.BaseRef, pl.PRNumber, pr.Merged, pr.MergeSHA, pr.HeadSHA, pullSweepLearnt); err != nil {
			res.Failed++
			log.Error().Err(err).Str("plan", pl.Code).Int64("pull_request", pl.PRNumber).
				Msg("Moving a plan whose pull request event was missed failed")
			continue
		}
		res.Found++
		log.Info().Str("plan", pl.Code).Int64("pull_request", pl.PRNumber).Bool("merged", pr.Merged).
			Msg("Plan moved for a pull request closed without its event reaching the service")
	}
	return res, nil
}
