package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/store"
)

// rateLimitWait ends a step that GitHub's rate limit (or the client's budget for it)
// stopped, or that GitHub failed transiently: the plan did not fail, it waits until
// until and its run takes the step again. Steps are idempotent, so the repeat
// finishes what the first try began.
type rateLimitWait struct {
	until time.Time
	cause error
	what  string // the history's words for the wait (rateLimitMessage, transientMessage)
}

func (e *rateLimitWait) Error() string {
	return e.what + e.until.UTC().Format(time.RFC3339) + ": " + e.cause.Error()
}

func (e *rateLimitWait) Unwrap() error { return e.cause }

// maxRateLimitWait bounds one wait: GitHub's primary limit resets within the hour,
// and a wait is taken again if the limit still holds after it.
const maxRateLimitWait = time.Hour

// waitForRateLimit records in pl's history that it waits for GitHub's rate limit,
// in its current state, and returns the *rateLimitWait its run waits on; ok is false
// when cause is no rate limit.
func (p *Pipeline) waitForRateLimit(ctx context.Context, pl store.Plan, pay Payload, cause error, step string) (store.Plan, error, bool) {
	if _, own := AsError(cause); own {
		return pl, nil, false
	}
	now := time.Now()
	until, ok := github.RetryAt(cause, now)
	if !ok {
		return pl, nil, false
	}
	until = maxTime(until, now.Add(minRateLimitWait))
	if limit := now.Add(maxRateLimitWait); until.After(limit) {
		until = limit
	}
	wait := &rateLimitWait{until: until, cause: cause, what: rateLimitMessage}
	if p.alreadyWaiting(ctx, pl.Code, step) {
		return pl, wait, true // one history entry for a wait that goes on
	}
	msg := rateLimitMessage + until.UTC().Format(time.TimeOnly+" MST")
	saved, err := p.save(ctx, pl, pay, Status(pl.Status), "system", step, msg)
	if err != nil {
		return pl, err, true
	}
	return saved, wait, true
}

// rateLimitMessage starts the history entry of a plan waiting for GitHub.
const rateLimitMessage = "waiting for GitHub's rate limit until "

// minRateLimitWait is the shortest wait: a limit that names no time, or a time now,
// must not turn into a loop of attempts.
const minRateLimitWait = time.Second

// alreadyWaiting reports whether the plan's latest history entry says that step
// waits for GitHub's rate limit: the step was tried again and is still limited.
func (p *Pipeline) alreadyWaiting(ctx context.Context, code, step string) bool {
	events, err := p.db.PlanEvents(ctx, code)
	if err != nil || len(events) == 0 {
		return false
	}
	last := events[len(events)-1]
	return last.Step == step && strings.HasPrefix(last.Message, rateLimitMessage)
}

// transientMessage is in the history entry of a step that failed transiently and
// is taken again, after whose failure it was: "GitHub" when GitHub's answer (or its
// silence) failed the step, else the step's own words ("preparing the change"),
// the error that follows naming the cluster or chart repository whose read failed.
const transientMessage = " failed transiently; trying again at "

// transientWho names whose failure a transient failure of step was, as its
// history entry starts: only an error of a call to GitHub is said to be GitHub's
// (github.Answer), since a cluster's read that timed out is as transient.
func transientWho(step string, cause error) string {
	if _, ofGitHub := github.Answer(cause); ofGitHub {
		return "GitHub"
	}
	if what, ok := stepWords[step]; ok {
		return what
	}
	return "the " + step + " step"
}

// retryTransient makes a step that failed transiently (github.Transient: a 5xx of
// GitHub, no answer within a client's timeout, a broken connection) wait and run
// again, up to the configured number of retries, recording each try in pl's
// history; ok is false when cause is not transient or the retries are spent, and the
// plan fails as before. The tries are counted from the plan's latest history entries,
// so a retry still counts after a restart, and a step that got further starts
// afresh.
func (p *Pipeline) retryTransient(ctx context.Context, pl store.Plan, pay Payload, cause error, step string) (store.Plan, error, bool) {
	if _, own := AsError(cause); own || ctx.Err() != nil || !github.Transient(cause) {
		return pl, nil, false
	}
	tries := p.transientTries(ctx, pl.Code, step)
	if tries >= p.cfg.TransientRetries {
		return pl, nil, false
	}
	wait := min(p.cfg.TransientBackoff<<tries, maxTransientBackoff)
	until := time.Now().Add(wait)
	words, _ := failureWords(cause)
	what := transientWho(step, cause) + transientMessage
	msg := fmt.Sprintf("%s%s (retry %d of %d): %s", what, until.UTC().Format(time.TimeOnly+" MST"),
		tries+1, p.cfg.TransientRetries, words)
	saved, err := p.save(ctx, pl, pay, Status(pl.Status), "system", step, msg)
	if err != nil {
		return pl, err, true
	}
	return saved, &rateLimitWait{until: until, cause: cause, what: what}, true
}

// maxTransientBackoff bounds one wait between retries, however many are configured.
const maxTransientBackoff = time.Minute

// transientTries counts the retries of step after a transient failure that end the
// plan's history.
func (p *Pipeline) transientTries(ctx context.Context, code, step string) int {
	events, err := p.db.PlanEvents(ctx, code)
	if err != nil {
		return 0
	}
	n := 0
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Step != step || !strings.Contains(events[i].Message, transientMessage) {
			break
		}
		n++
	}
	return n
}

// sleepOutRateLimit waits for the time err names when it is a *rateLimitWait, and
// reports whether it was one. It returns early when ctx ends (shutdown, a lost
// claim).
func sleepOutRateLimit(ctx context.Context, err error) bool {
	var w *rateLimitWait
	if !errors.As(err, &w) {
		return false
	}
	t := time.NewTimer(time.Until(w.until))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return true
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
