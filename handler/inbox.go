package handler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/poll"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/textcut"
)

// Inbox defaults.
const (
	DefaultWorkers      = 4
	DefaultLease        = 2 * time.Minute
	DefaultPollInterval = 2 * time.Second
	DefaultMaxAttempts  = 8
	DefaultRetryBase    = 2 * time.Second
	DefaultRetryCap     = 10 * time.Minute
	// DefaultRetention is how long done deliveries are kept before they are pruned.
	DefaultRetention = 30 * 24 * time.Hour
	// DefaultPruneInterval is how often the inbox prunes done deliveries.
	DefaultPruneInterval = time.Hour
	// DefaultBatchBudget is how long a worker works through one claimed batch before
	// it hands back what it has not started.
	DefaultBatchBudget = time.Second

	// claimBatch is how many deliveries a worker leases at once. A batch is claimed by
	// one statement and its done deliveries are recorded by one more, so the inbox's
	// own cost is two statements per batch, not per delivery. A slow delivery does not
	// hold the rest of its batch hostage: see InboxOptions.BatchBudget.
	claimBatch = 32
	// recordTimeout bounds recording a batch's outcomes and handing back its unstarted
	// deliveries once the worker's context has ended (shutdown), when that work must
	// still reach the store.
	recordTimeout = 5 * time.Second
	// maxErrorLength bounds the error kept on a delivery.
	maxErrorLength = 4000
)

// InboxOptions tunes the workers; zero values take the defaults.
type InboxOptions struct {
	// Workers is the number of concurrent workers. SQLite allows one writer at a
	// time, so on SQLite there is always exactly one worker.
	Workers int
	// Lease is how long a claimed delivery belongs to its worker. A handler gets
	// the lease (less a margin) as its deadline, so a delivery is re-claimed only
	// after its first worker has given up or died.
	Lease time.Duration
	// PollInterval is how often an idle worker looks for work that arrived without
	// a Wake (from another replica) or became due after a backoff.
	PollInterval time.Duration
	// MaxAttempts is how many times a delivery is tried before it is parked as failed.
	MaxAttempts int
	// RetryBase and RetryCap shape the exponential backoff between attempts.
	RetryBase, RetryCap time.Duration
	// Retention is how long a done delivery is kept; older ones are deleted every
	// PruneInterval. Failed and waiting deliveries are kept whatever their age.
	Retention, PruneInterval time.Duration
	// BatchBudget is how long a worker spends on one claimed batch: once it has run
	// this long, the deliveries of the batch not started yet go back to the inbox for
	// any worker of any replica, rather than waiting behind a slow one.
	BatchBudget time.Duration
	// Outcome, when set, is told each recorded outcome of an attempt (one of the
	// Outcome* values), for metrics. event is the delivery's event type when a
	// handler takes it and "other" otherwise, so its values stay a fixed set.
	Outcome func(event, outcome string)
}

// Outcomes of one attempt at a delivery, as InboxOptions.Outcome is told them.
const (
	OutcomeProcessed   = "processed"    // handled, done
	OutcomeIgnored     = "ignored"      // no handler takes the event, done
	OutcomeSkipped     = "skipped"      // the handler cannot act on it, done with a reason
	OutcomeFailed      = "failed"       // given up: a permanent error or attempts used up
	OutcomeRateLimited = "rate_limited" // deferred until GitHub's rate limit resets
	OutcomeRetried     = "retried"      // failed, will be tried again after a backoff
)

func (o InboxOptions) withDefaults(dialect store.Dialect) InboxOptions {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if dialect == store.SQLite {
		o.Workers = 1
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.RetryBase <= 0 {
		o.RetryBase = DefaultRetryBase
	}
	if o.RetryCap <= 0 {
		o.RetryCap = DefaultRetryCap
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.PruneInterval <= 0 {
		o.PruneInterval = DefaultPruneInterval
	}
	if o.BatchBudget <= 0 {
		o.BatchBudget = DefaultBatchBudget
	}
	return o
}

// Inbox processes the stored webhook deliveries: workers claim them from the store
// (several replicas may share one PostgreSQL inbox), dispatch each to the handler of
// its event, and record the outcome. A failed delivery is retried with exponential
// backoff and parked as failed, with its error, after MaxAttempts; one its handler
// skipped (Skip) is done at once, with the reason. A delivery GitHub's rate limit
// stopped waits until the time GitHub named and that attempt does not count toward
// MaxAttempts: the delivery did not fail, GitHub asked for a pause, and rate limits
// end (an hour at most for the primary limit), so such a delivery is never parked for
// it. Workers claim deliveries in batches and record a batch's done ones together
// (see runBatch); what a worker does not start goes back to the inbox. A delivery
// whose worker dies is claimed again when its lease runs out, so a restart resumes.
// Done deliveries are pruned after Retention.
type Inbox struct {
	db       *store.DB
	opts     InboxOptions
	handlers map[string]githubapp.EventHandler
	wake     chan struct{}
	// drain is what a worker calls for Drain; nil is Drain. For tests of a store
	// that fails.
	drain func(context.Context) (int, error)
}

// NewInbox builds an inbox dispatching to handlers; two handlers for one event are
// a wiring mistake and an error.
func NewInbox(db *store.DB, opts InboxOptions, handlers ...githubapp.EventHandler) (*Inbox, error) {
	byEvent := map[string]githubapp.EventHandler{}
	for _, h := range handlers {
		for _, event := range h.Handles() {
			if _, dup := byEvent[event]; dup {
				return nil, fmt.Errorf("two handlers for event %q", event)
			}
			byEvent[event] = h
		}
	}
	return &Inbox{db: db, opts: opts.withDefaults(db.Dialect()), handlers: byEvent, wake: make(chan struct{}, 1)}, nil
}

// Wake tells an idle worker that a delivery was stored. It never blocks.
func (in *Inbox) Wake() {
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// Run starts the workers and blocks until ctx ends and they have stopped. A delivery
// being processed when ctx ends keeps its lease and is claimed again after it.
func (in *Inbox) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := 0; i < in.opts.Workers; i++ {
		wg.Add(1)
		go func(worker int) {
			defer wg.Done()
			logger := zerolog.Ctx(ctx).With().Int("inbox_worker", worker).Logger()
			in.work(logger.WithContext(ctx))
		}(i)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		in.pruneEvery(ctx)
	}()
	wg.Wait()
}

// pruneEvery prunes done deliveries now and then every PruneInterval until ctx ends.
// Replicas prune concurrently without harm: a row is deleted once.
func (in *Inbox) pruneEvery(ctx context.Context) {
	t := time.NewTicker(in.opts.PruneInterval)
	defer t.Stop()
	for {
		if n, err := in.Prune(ctx); err != nil && ctx.Err() == nil {
			zerolog.Ctx(ctx).Error().Err(err).Msg("Pruning done webhook deliveries failed")
		} else if n > 0 {
			zerolog.Ctx(ctx).Info().Int64("deleted", n).Dur("retention", in.opts.Retention).Msg("Pruned done webhook deliveries")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Prune deletes the done deliveries that finished more than Retention ago and
// returns how many.
func (in *Inbox) Prune(ctx context.Context) (int64, error) {
	return in.db.PruneWebhookDeliveries(ctx, time.Now().Add(-in.opts.Retention))
}

// work runs one worker. While the store fails (a database that is down fails every
// worker's drain), the worker logs the first failure and then one line a minute, and
// waits longer between tries: see poll.Loop.
func (in *Inbox) work(ctx context.Context) {
	drain := in.drain
	if drain == nil {
		drain = in.Drain
	}
	poll.Loop{
		Interval:  in.opts.PollInterval,
		Wake:      in.wake,
		Failed:    "Webhook inbox worker failed to process deliveries",
		Recovered: "Webhook inbox worker recovered",
	}.Run(ctx, func(ctx context.Context) error {
		_, err := drain(ctx)
		return err
	})
}

// Drain claims and processes deliveries until none is due, and returns how many it
// processed. Run's workers call it; tests and tools may call it directly.
func (in *Inbox) Drain(ctx context.Context) (int, error) {
	done := 0
	for ctx.Err() == nil {
		batch, err := in.db.ClaimWebhookDeliveries(ctx, claimBatch, in.opts.Lease)
		if err != nil {
			return done, err
		}
		if len(batch) == 0 {
			return done, nil
		}
		if len(batch) == claimBatch {
			// More may be waiting: let an idle worker join in.
			in.Wake()
		}
		n, err := in.runBatch(ctx, batch)
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// finished is a delivery whose attempt ended done (processed, ignored or skipped),
// waiting for its batch's completions to be recorded together.
type finished struct {
	delivery   store.WebhookDelivery
	outcome    string
	completion store.DeliveryCompletion
}

// runBatch processes a claimed batch in order and returns how many deliveries it
// processed. The done ones are recorded together at the end; failures and retries
// are recorded as they happen (they are rare, and each has its own state to write).
// Deliveries it does not start go back to the inbox: all that remain once the batch
// has run for BatchBudget (at that moment, even while a slow delivery still runs,
// so other workers take them), and those left when the context ends or recording
// an outcome fails. The record and the hand-back happen even when ctx has ended, so
// a shutdown neither repeats finished work nor leaves claims to wait out their
// lease. A crash before the end of a batch does: its deliveries are claimed again
// once their lease runs out and processed again, as any interrupted attempt is.
func (in *Inbox) runBatch(ctx context.Context, batch []store.WebhookDelivery) (int, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	var (
		mu         sync.Mutex
		next       int  // the first delivery of batch not started
		handedBack bool // the budget ran out and batch[next:] went back
	)
	overBudget := make(chan struct{})
	budget := time.AfterFunc(in.opts.BatchBudget, func() {
		defer close(overBudget)
		mu.Lock()
		handedBack = true
		rest := batch[next:]
		mu.Unlock()
		if err := in.release(rctx, rest); err != nil {
			zerolog.Ctx(ctx).Error().Err(err).Msg("Handing back the unstarted part of a slow webhook batch failed; it waits out its lease")
		}
	})
	start := func(i int) bool {
		mu.Lock()
		defer mu.Unlock()
		if handedBack {
			return false
		}
		next = i + 1
		return true
	}

	var (
		done       []finished
		unstarted  []store.WebhookDelivery
		processErr error
		processed  int
	)
	for i, d := range batch {
		if ctx.Err() != nil || !start(i) {
			break
		}
		f, release, err := in.process(ctx, d)
		if err != nil {
			processErr = err
			break
		}
		if release {
			unstarted = append(unstarted, d)
			continue
		}
		processed++
		if f != nil {
			done = append(done, *f)
		}
	}
	if !budget.Stop() {
		<-overBudget
	}
	if !handedBack {
		unstarted = append(unstarted, batch[next:]...)
	}
	return processed, errors.Join(processErr, in.recordDone(rctx, done), in.release(rctx, unstarted))
}

// recordDone records the batch's done deliveries in one go and reports each outcome
// the store took.
func (in *Inbox) recordDone(ctx context.Context, done []finished) error {
	if len(done) == 0 {
		return nil
	}
	completions := make([]store.DeliveryCompletion, len(done))
	for i, f := range done {
		completions[i] = f.completion
	}
	refused, err := in.db.CompleteWebhookDeliveries(ctx, completions)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range done {
		err := refused[f.delivery.Claim()]
		fctx := ctx
		if err != nil {
			fctx = withDeliveryLogger(ctx, f.delivery)
		}
		errs = append(errs, in.finish(fctx, f.delivery, f.outcome, err))
	}
	return errors.Join(errs...)
}

// release hands deliveries this worker claimed and did not run back to the inbox.
func (in *Inbox) release(ctx context.Context, unstarted []store.WebhookDelivery) error {
	if len(unstarted) == 0 {
		return nil
	}
	claims := make([]store.DeliveryClaim, len(unstarted))
	for i, d := range unstarted {
		claims[i] = d.Claim()
	}
	zerolog.Ctx(ctx).Debug().Int("deliveries", len(claims)).Msg("Handing unstarted webhook deliveries back to the inbox")
	return in.db.ReleaseWebhookDeliveries(ctx, claims)
}

// process runs one claimed delivery. An attempt that ended done comes back as f, to
// be recorded with its batch; any other outcome is recorded here. release is true
// when the attempt did not run to an outcome (the lease was nearly over before it
// could start, or the worker is shutting down), so the delivery goes back to the inbox.
func (in *Inbox) process(ctx context.Context, d store.WebhookDelivery) (f *finished, release bool, err error) {
	ctx = withDeliveryLogger(ctx, d)
	logger := zerolog.Ctx(ctx)

	h, ok := in.handlers[d.Event]
	if !ok {
		return &finished{delivery: d, outcome: OutcomeIgnored, completion: store.DeliveryCompletion{Claim: d.Claim(), FinishedAt: time.Now()}}, false, nil
	}
	// Finish well inside the lease, so no other worker can claim the delivery while
	// this one still works on it. The deadline counts from the claim, not from now:
	// deliveries later in a batch have already spent part of their lease waiting. A
	// handler that ignores its context can still overrun; the claim's fencing then
	// refuses its outcome (see record).
	deadline := d.LeaseExpiresAt.Add(-in.opts.Lease / 10)
	if !time.Now().Before(deadline) {
		logger.Debug().Msg("Webhook delivery lease nearly over before it could start; handing it back")
		return nil, true, nil
	}
	hctx, cancel := context.WithDeadline(ctx, deadline)
	err = safeHandle(hctx, h, d)
	cancel()
	if err == nil {
		logger.Debug().Msg("Webhook delivery processed")
		return &finished{delivery: d, outcome: OutcomeProcessed, completion: store.DeliveryCompletion{Claim: d.Claim(), FinishedAt: time.Now()}}, false, nil
	}
	if reason, ok := SkipReason(err); ok {
		logger.Warn().Str("reason", reason).Msg("Webhook delivery skipped")
		reason = truncate(reason, maxErrorLength)
		if reason == "" {
			reason = "skipped"
		}
		return &finished{delivery: d, outcome: OutcomeSkipped, completion: store.DeliveryCompletion{Claim: d.Claim(), SkipReason: reason, FinishedAt: time.Now()}}, false, nil
	}
	if ctx.Err() != nil {
		// Shutting down: the attempt was cut short, not failed.
		return nil, true, nil
	}
	reason := truncate(err.Error(), maxErrorLength)
	if IsPermanent(err) {
		logger.Error().Err(err).Msg("Webhook delivery failed; giving up")
		return nil, false, in.finish(ctx, d, OutcomeFailed, in.db.FailWebhookDelivery(ctx, d.Claim(), reason))
	}
	now := time.Now()
	if at, ok := github.RetryAt(err, now); ok {
		// Never before GitHub's time; plus a base delay with jitter, so a Retry-After
		// of 0 cannot spin and replicas do not all come back in the same second.
		at = maxTime(at, now).Add(retryDelay(in.opts.RetryBase, in.opts.RetryCap, 1))
		logger.Warn().Err(err).Time("retry_at", at).Msg("Webhook delivery rate limited by GitHub; will retry after the limit")
		return nil, false, in.finish(ctx, d, OutcomeRateLimited, in.db.DeferWebhookDeliveryUntil(ctx, d.Claim(), reason, at))
	}
	counted := d.Attempts - d.FreeAttempts
	if counted >= in.opts.MaxAttempts {
		logger.Error().Err(err).Msg("Webhook delivery failed; giving up")
		return nil, false, in.finish(ctx, d, OutcomeFailed, in.db.FailWebhookDelivery(ctx, d.Claim(), reason))
	}
	delay := retryDelay(in.opts.RetryBase, in.opts.RetryCap, counted)
	logger.Warn().Err(err).Dur("retry_in", delay).Msg("Webhook delivery failed; will retry")
	return nil, false, in.finish(ctx, d, OutcomeRetried, in.db.RetryWebhookDeliveryAt(ctx, d.Claim(), reason, time.Now().Add(delay)))
}

// withDeliveryLogger returns ctx with a logger naming the delivery and its attempt.
func withDeliveryLogger(ctx context.Context, d store.WebhookDelivery) context.Context {
	return zerolog.Ctx(ctx).With().
		Str(LogKeyDeliveryID, d.DeliveryID).
		Str(LogKeyEventType, d.Event).
		Str(LogKeyAction, d.Action).
		Int("attempt", d.Attempts).
		Logger().WithContext(ctx)
}

// finish records the outcome of an attempt at d (see record) and, once the store has
// taken it, reports it to InboxOptions.Outcome.
func (in *Inbox) finish(ctx context.Context, d store.WebhookDelivery, outcome string, err error) error {
	if err != nil {
		return in.record(ctx, err)
	}
	if in.opts.Outcome != nil {
		event := "other"
		if _, ok := in.handlers[d.Event]; ok {
			event = d.Event
		}
		in.opts.Outcome(event, outcome)
	}
	return nil
}

// record checks the store's answer to a delivery's outcome. ErrLeaseLost means this
// worker overran its lease and another worker claimed the delivery since: that
// worker's attempt owns the delivery's state now, so this outcome is dropped rather
// than reported as a failure of the worker.
func (in *Inbox) record(ctx context.Context, err error) error {
	if errors.Is(err, store.ErrLeaseLost) {
		zerolog.Ctx(ctx).Warn().Err(err).
			Msg("Webhook delivery outcome dropped: the lease ran out and another worker claimed the delivery")
		return nil
	}
	return err
}

// safeHandle turns a handler's panic into an error, so one bad delivery cannot stop
// a worker.
func safeHandle(ctx context.Context, h githubapp.EventHandler, d store.WebhookDelivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = Permanent(fmt.Errorf("handler panicked: %v", r))
		}
	}()
	err = h.Handle(ctx, d.Event, d.DeliveryID, d.Payload)
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("handler ran out of time: %w", err)
	}
	return err
}

// retryDelay is the wait after the n-th failed attempt: base·2^(n-1) plus up to 10%
// jitter (so replicas do not retry in step), growing no further once it nears cap.
func retryDelay(base, cap time.Duration, attempts int) time.Duration {
	b := wait.Backoff{Duration: base, Factor: 2, Jitter: 0.1, Steps: max(attempts, 1), Cap: cap}
	var d time.Duration
	for b.Steps > 0 {
		d = b.Step()
	}
	return d
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// truncate is s as a delivery keeps it: text, its bytes that are no UTF-8 and its
// NUL characters replaced with U+FFFD (PostgreSQL stores neither in text, and
// refusing the record would fail the worker's whole batch), cut at n bytes at a
// whole character.
func truncate(s string, n int) string {
	return textcut.Cut(strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD"), n)
}
