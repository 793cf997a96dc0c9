package prcheck

import (
	"context"
	"time"

	"github.com/rs/zerolog"
)

// Pruner deletes, now and then every Interval, the finished checks that are no
// longer the current check of their key and ended more than Retention ago: a row is
// added per push, and only the current check's page is linked from a head GitHub
// still shows as the pull request's. Replicas prune concurrently without harm.
type Pruner struct {
	Store interface {
		PrunePullChecks(ctx context.Context, before time.Time) (int64, error)
	}
	// Retention and Interval must be positive.
	Retention, Interval time.Duration
}

// Run prunes until ctx ends.
func (p Pruner) Run(ctx context.Context) {
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		if n, err := p.Store.PrunePullChecks(ctx, time.Now().Add(-p.Retention)); err != nil && ctx.Err() == nil {
			zerolog.Ctx(ctx).Error().Err(err).Msg("Pruning superseded pull request checks failed")
		} else if n > 0 {
			zerolog.Ctx(ctx).Info().Int64("deleted", n).Dur("retention", p.Retention).Msg("Pruned superseded pull request checks")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
