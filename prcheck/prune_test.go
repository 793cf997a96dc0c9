package prcheck_test

import (
	"context"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/prcheck"
)

type pruneStore struct {
	before chan time.Time
}

func (s pruneStore) PrunePullChecks(_ context.Context, before time.Time) (int64, error) {
	s.before <- before
	return 1, nil
}

// TestPrunerPrunesAtOnceWithItsRetention: Run prunes when it starts, checks that
// ended more than Retention ago, and stops with its context.
func TestPrunerPrunesAtOnceWithItsRetention(t *testing.T) {
	s := pruneStore{before: make(chan time.Time, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	start := time.Now()
	go func() { prcheck.Pruner{Store: s, Retention: 48 * time.Hour, Interval: time.Hour}.Run(ctx); close(done) }()
	before := <-s.before
	if before.After(time.Now().Add(-48*time.Hour)) || before.Before(start.Add(-48*time.Hour)) {
		t.Errorf("pruned before %v, want the start less 48h (%v)", before, start.Add(-48*time.Hour))
	}
	cancel()
	<-done
}
