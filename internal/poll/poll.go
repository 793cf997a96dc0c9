// Package poll runs a background worker's drain again and again, and owns how the
// worker behaves while what it drains (the database, mostly) keeps failing: the
// first failure is logged at once and later ones at most once a LogEvery, with the
// count of those left out; the wait before the next try grows from Interval up to
// MaxBackoff, so that every worker of every replica does not hammer a database
// that is down; and the first drain that works again is logged once at Info.
package poll

import (
	"context"
	"math"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Defaults of a Loop's zero fields.
const (
	DefaultMaxBackoff = time.Minute
	DefaultLogEvery   = time.Minute
)

// Loop calls a drain now, then again Interval after each one that worked, until its
// context ends.
type Loop struct {
	// Interval is the wait after a drain that worked, and the first wait after one
	// that failed; it must be positive.
	Interval time.Duration
	// MaxBackoff bounds the wait after failed drains, which doubles (with up to 10%
	// jitter, so replicas do not retry in step) with each failure in a row.
	MaxBackoff time.Duration
	// Wake, when set, starts the next drain before the wait is over: work arrived.
	Wake <-chan struct{}
	// Failed is the message of the Error line of a failed drain; Recovered is that of
	// the Info line of the first drain that works after failures.
	Failed, Recovered string
	// LogEvery is the least time between two Error lines of one run of failures;
	// the failures in between are counted on the next line as "suppressed".
	LogEvery time.Duration
	// Now is the clock of LogEvery, for tests; nil is time.Now.
	Now func() time.Time
}

// Run calls drain until ctx ends. A drain that fails because ctx ended is not
// a failure.
func (l Loop) Run(ctx context.Context, drain func(context.Context) error) {
	logger := zerolog.Ctx(ctx)
	var s streak
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-l.Wake:
		}
		err := drain(ctx)
		if ctx.Err() != nil {
			return
		}
		// Since Go 1.23 Reset discards a value the timer sent and nobody received,
		// so a wake that came first cannot leave a stale tick behind.
		timer.Reset(l.after(logger, &s, err))
	}
}

// streak is a run of failed drains.
type streak struct {
	failures   int       // failed drains in a row
	suppressed int       // failures not logged since the last line
	since      time.Time // the first failure
	logged     time.Time // the last Error line
	backoff    wait.Backoff
}

// after logs the outcome of a drain as the streak calls for and returns the wait
// before the next one.
func (l Loop) after(logger *zerolog.Logger, s *streak, err error) time.Duration {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	if err == nil {
		if s.failures > 0 {
			logger.Info().Int("failures", s.failures).Int("suppressed", s.suppressed).
				Dur("failing_for", now().Sub(s.since)).
				Msgf("%s after %d %s", l.Recovered, s.failures, plural(s.failures, "failure", "failures"))
			*s = streak{}
		}
		return l.Interval
	}
	if s.failures == 0 {
		s.since = now()
		s.backoff = wait.Backoff{Duration: l.Interval, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32,
			Cap: cmpOr(l.MaxBackoff, DefaultMaxBackoff)}
	}
	s.failures++
	retryIn := s.backoff.Step()
	if t := now(); s.failures == 1 || t.Sub(s.logged) >= cmpOr(l.LogEvery, DefaultLogEvery) {
		logger.Error().Err(err).Int("failures", s.failures).Int("suppressed", s.suppressed).
			Dur("retry_in", retryIn).Msg(l.Failed)
		s.logged, s.suppressed = t, 0
	} else {
		s.suppressed++
	}
	return retryIn
}

// cmpOr is d when positive, else def.
func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
