package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/semaphore"
)

// Limits is the budget each installation's clients keep to, below GitHub's secondary
// rate limits: requests beyond it wait their turn in the client instead of being
// refused by GitHub. The zero value takes GitHub's documented limits.
type Limits struct {
	// Concurrent bounds the requests in flight at once (GitHub: 100).
	Concurrent int
	// Content bounds the content-creating requests (POST, PATCH, PUT, DELETE) in any
	// window of each Window's length (GitHub: 80 a minute and 500 an hour).
	Content []Window
	// MaxWait is the longest a request waits inside the client, for its turn (a
	// concurrency slot, room in the content windows) or for a limit GitHub reported
	// to pass; a request's own deadline bounds it too. A
	// longer wait is returned at once as a *BudgetError, so the caller can wait
	// without holding a request open (the pipeline records it in the plan's history).
	MaxWait time.Duration
	// Abandoned is how long a request the client gave up on before its answer
	// ended (its timeout, a cancelled context, a connection that broke) keeps its
	// Concurrent slot after that. GitHub counts a request in flight until it has
	// served it, which the client cannot see once it stopped listening; GitHub ends
	// a request after 10 s of work, so it has let go of one the client abandoned
	// by then. Releasing the slot at once would let the next request go out while
	// GitHub still counts the old one, one over the limit for each timeout.
	Abandoned time.Duration
}

// Window is a number of requests allowed in any span of time of length Per.
type Window struct {
	Requests int
	Per      time.Duration
}

// GitHub's secondary limits for one installation and how long a request may wait in
// the client by default.
const (
	DefaultConcurrent = 100
	DefaultMaxWait    = 20 * time.Second
	// DefaultAbandoned is GitHub's 10 s limit on serving a request, and 5 s for a
	// request that was still on its way to GitHub when the client gave up on it.
	DefaultAbandoned = 15 * time.Second
)

// DefaultContentWindows are GitHub's limits on content-creating requests.
var DefaultContentWindows = []Window{{Requests: 80, Per: time.Minute}, {Requests: 500, Per: time.Hour}}

func (l Limits) withDefaults() Limits {
	if l.Concurrent <= 0 {
		l.Concurrent = DefaultConcurrent
	}
	if len(l.Content) == 0 {
		l.Content = DefaultContentWindows
	}
	if l.MaxWait <= 0 {
		l.MaxWait = DefaultMaxWait
	}
	if l.Abandoned <= 0 {
		l.Abandoned = DefaultAbandoned
	}
	return l
}

// BudgetError is a request the budget did not send: it would have had to wait until
// Until, longer than the client may hold it. RetryAt reads Until, so callers wait
// as they do for GitHub's own rate limit answers.
type BudgetError struct {
	Installation string
	// Reason is the limit: "content" (content-creating requests), "concurrent" (no
	// concurrency slot came free in time), "secondary" (a secondary rate limit
	// GitHub answered) or "primary" (the hourly requests used).
	Reason string
	Until  time.Time
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("waiting for GitHub's rate limit (%s) of installation %s until %s",
		e.Reason, e.Installation, e.Until.UTC().Format(time.RFC3339))
}

// Rate limit reasons, as BudgetError.Reason and the wait metrics name them.
const (
	reasonContent    = "content"
	reasonSecondary  = "secondary"
	reasonPrimary    = "primary"
	reasonConcurrent = "concurrent"
)

// budget is one installation's: a semaphore for the concurrency limit, a log of
// content-creating requests for the content windows, and the time until which GitHub
// asked for no requests at all.
type budget struct {
	label   string
	limits  Limits
	sem     *semaphore.Weighted
	metrics *clientMetrics

	mu sync.Mutex
	// sent holds when content-creating requests were answered, oldest first, as long
	// as a window counts them; inFlight counts those sent and not answered yet.
	sent     []time.Time
	inFlight int
	// waiting counts the content-creating requests waiting for their turn.
	waiting int
	// blockedUntil is when GitHub allows requests again after a rate limit answer.
	blockedUntil time.Time
	blockReason  string
}

// budgets holds one budget per rate limit (installation id, "app", "user"); clients
// are created and evicted, the budget of their installation stays.
type budgets struct {
	limits  Limits
	metrics *clientMetrics

	mu  sync.Mutex
	all map[string]*budget
}

func newBudgets(l Limits, m *clientMetrics) *budgets {
	return &budgets{limits: l.withDefaults(), metrics: m, all: map[string]*budget{}}
}

func (bs *budgets) of(label string) *budget {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b, ok := bs.all[label]
	if !ok {
		b = &budget{label: label, limits: bs.limits, sem: semaphore.NewWeighted(int64(bs.limits.Concurrent)), metrics: bs.metrics}
		bs.all[label] = b
	}
	return b
}

// middleware paces the requests of one rate limit's clients through its budget.
func (bs *budgets) middleware(label string) func(http.RoundTripper) http.RoundTripper {
	b := bs.of(label)
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) { return b.roundTrip(next, r) })
	}
}

// A request refused for a rate limit is sent again at most maxResends times, and
// never sooner than minResendWait: a Retry-After of 0 must not turn into a loop.
const (
	maxResends    = 2
	minResendWait = time.Second
)

// roundTrip sends r within the budget. A secondary rate limit answer (or a 429) is
// waited out and the request sent again when the wait fits; a request refused by a
// secondary limit was not carried out, so sending it again is safe.
func (b *budget) roundTrip(next http.RoundTripper, r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	resends := 0
	for {
		if err := b.waitUnblocked(ctx); err != nil {
			return nil, err
		}
		if err := b.acquire(ctx); err != nil {
			return nil, err
		}
		sent := func() {}
		if createsContent(r) {
			var err error
			if sent, err = b.waitTurn(ctx); err != nil {
				b.sem.Release(1)
				return nil, err
			}
		}
		res, err := next.RoundTrip(r)
		sent()
		if err != nil {
			if neverSent(err) {
				b.sem.Release(1)
			} else {
				b.abandon(ctx)
			}
			return nil, err
		}
		b.observe(res)
		at, limited := headersRetryAt(res.StatusCode, res.Header, time.Now())
		wait := max(time.Until(at), minResendWait)
		resendable := r.GetBody != nil || r.Body == nil || r.Body == http.NoBody
		if !limited || !resendable || resends >= maxResends || wait > b.allowed(ctx) {
			res.Body = &releasingBody{ReadCloser: res.Body, release: func() { b.sem.Release(1) }, abandon: func() { b.abandon(ctx) }}
			return res, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		_ = res.Body.Close()
		b.sem.Release(1)
		resends++
		if err := b.sleep(ctx, wait, reasonSecondary); err != nil {
			return nil, err
		}
		if r.GetBody != nil {
			body, err := r.GetBody()
			if err != nil {
				return nil, fmt.Errorf("resend request after GitHub's rate limit: %w", err)
			}
			r = r.Clone(ctx)
			r.Body = body
		}
	}
}

// acquire waits for a concurrency slot as long as a request may wait in the client,
// or returns a *BudgetError. The wait counts against the request's timeout, which
// bounds the whole call: a request that waited its turn for most of it would go out
// with too little time left for GitHub to answer, and fail as if GitHub had not.
func (b *budget) acquire(ctx context.Context) error {
	if b.sem.TryAcquire(1) {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, b.allowed(ctx))
	defer cancel()
	start := time.Now()
	err := b.sem.Acquire(wctx, 1)
	if err == nil || ctx.Err() != nil {
		b.metrics.waited(b.label, reasonConcurrent, time.Since(start))
		return err
	}
	b.metrics.refused(b.label, reasonConcurrent)
	// No answer says when a slot frees up; the caller tries again shortly.
	return &BudgetError{Installation: b.label, Reason: reasonConcurrent, Until: time.Now()}
}

// abandon gives back the concurrency slot of a request the client gave up on once
// GitHub must have stopped serving it (see Limits.Abandoned).
func (b *budget) abandon(ctx context.Context) {
	zerolog.Ctx(ctx).Debug().Str("installation", b.label).Dur("for", b.limits.Abandoned).
		Msg("A request given up on keeps its concurrency slot while GitHub may still serve it")
	time.AfterFunc(b.limits.Abandoned, func() { b.sem.Release(1) })
}

// neverSent reports whether err ended a request before any of it reached GitHub:
// no connection could be made, so GitHub counts nothing.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// observe records what a response says about the limits: a rate limit answer blocks
// every request until its time, and an exhausted primary limit until its reset.
func (b *budget) observe(res *http.Response) {
	now := time.Now()
	reason, until := "", time.Time{}
	if at, ok := headersRetryAt(res.StatusCode, res.Header, now); ok {
		reason, until = reasonSecondary, at
		if res.Header.Get("X-RateLimit-Remaining") == "0" {
			reason = reasonPrimary
		}
	} else if res.Header.Get("X-RateLimit-Remaining") == "0" {
		if secs, err := strconv.ParseInt(res.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			reason, until = reasonPrimary, time.Unix(secs, 0)
		}
	}
	if reason == "" || !until.After(now) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if until.After(b.blockedUntil) {
		b.blockedUntil, b.blockReason = until, reason
	}
}

// allowed is how long a request may wait in the client from now.
func (b *budget) allowed(ctx context.Context) time.Duration {
	d := b.limits.MaxWait
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	return d
}

// waitUnblocked waits out a rate limit GitHub reported, or returns a *BudgetError
// when that is longer than the request may wait.
func (b *budget) waitUnblocked(ctx context.Context) error {
	b.mu.Lock()
	until, reason := b.blockedUntil, b.blockReason
	b.mu.Unlock()
	wait := time.Until(until)
	if wait <= 0 {
		return nil
	}
	if wait > b.allowed(ctx) {
		b.metrics.refused(b.label, reason)
		return &BudgetError{Installation: b.label, Reason: reason, Until: until}
	}
	return b.sleep(ctx, wait, reason)
}

// waitTurn waits until one more content-creating request stays within every window
// and counts it in flight; the returned function records it as sent once its answer
// came. A request counts from its turn until a window after its answer: GitHub
// counted it at some moment in between, so however long a request took to get there
// (a slow connection, a token refresh on the way), no later request can share a
// window with it that GitHub would see over the limit. The caller holds its
// concurrency slot already, so nothing stands between the turn and the send. A turn
// further away than the request may wait is not waited for: *BudgetError.
func (b *budget) waitTurn(ctx context.Context) (sent func(), err error) {
	b.mu.Lock()
	b.waiting++
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.waiting--
		b.mu.Unlock()
	}()
	for {
		now := time.Now()
		b.mu.Lock()
		free, queued := b.nextFreeLocked(now)
		if !free.After(now) {
			b.inFlight++
			b.metrics.contentLeft(b.label, b.leftLocked(now))
			b.mu.Unlock()
			return b.answered, nil
		}
		b.mu.Unlock()
		if queued.Sub(now) > b.allowed(ctx) {
			b.metrics.refused(b.label, reasonContent)
			return nil, &BudgetError{Installation: b.label, Reason: reasonContent, Until: queued}
		}
		if err := b.sleep(ctx, free.Sub(now), reasonContent); err != nil {
			return nil, err
		}
	}
}

// answered records a content-creating request in flight as answered now.
func (b *budget) answered() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inFlight--
	b.sent = append(b.sent, time.Now())
}

// occupiedLocked returns the times from which the content windows count their
// requests, oldest first: the answers within the longest window, then now for each
// request in flight (it counts at least a window from now). Older answers are
// forgotten.
func (b *budget) occupiedLocked(now time.Time) []time.Time {
	longest := time.Duration(0)
	for _, w := range b.limits.Content {
		longest = max(longest, w.Per)
	}
	drop := 0
	for drop < len(b.sent) && !b.sent[drop].After(now.Add(-longest)) {
		drop++
	}
	b.sent = b.sent[drop:]
	occupied := append([]time.Time(nil), b.sent...)
	for range b.inFlight {
		occupied = append(occupied, now)
	}
	return occupied
}

// nextFreeLocked returns when the windows next allow a request (now, if they do) and,
// for the requests already waiting, an estimate of when the last of them gets its
// turn: the time a request joining the queue plans for.
func (b *budget) nextFreeLocked(now time.Time) (free, queued time.Time) {
	occupied := b.occupiedLocked(now)
	n := len(occupied)
	free, queued = now, now
	for _, w := range b.limits.Content {
		in := 0 // requests in this window
		for _, t := range occupied {
			if t.After(now.Add(-w.Per)) {
				in++
			}
		}
		first := n - in
		if in >= w.Requests {
			free = maxTime(free, occupied[first+in-w.Requests].Add(w.Per))
		}
		// The requests waiting ahead take the next turns: the p-th waiter (from 0)
		// goes when the request Requests-p places before the newest leaves the
		// window, or, past the requests counted so far, a window later for each full
		// window ahead.
		at := now
		switch i := in - w.Requests + b.waiting - 1; {
		case i >= in:
			at = now.Add(w.Per * time.Duration(1+(i-in)/w.Requests))
		case i >= 0:
			at = occupied[first+i].Add(w.Per)
		}
		queued = maxTime(queued, at)
	}
	return free, maxTime(queued, free)
}

// leftLocked is how many content-creating requests the tightest window still allows
// now.
func (b *budget) leftLocked(now time.Time) int {
	occupied := b.occupiedLocked(now)
	left := -1
	for _, w := range b.limits.Content {
		used := 0
		for _, t := range occupied {
			if t.After(now.Add(-w.Per)) {
				used++
			}
		}
		if l := max(w.Requests-used, 0); left < 0 || l < left {
			left = l
		}
	}
	return left
}

// sleep waits d for reason, logging waits a person would notice and counting them.
func (b *budget) sleep(ctx context.Context, d time.Duration, reason string) error {
	if d <= 0 {
		return nil
	}
	b.metrics.waited(b.label, reason, d)
	if d >= time.Second {
		zerolog.Ctx(ctx).Info().Str("installation", b.label).Str("limit", reason).Dur("wait", d).
			Msg("Waiting for GitHub's rate limit")
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// createsContent reports whether GitHub counts r against the content-creation limit.
// GraphQL queries are POSTs that create nothing.
func createsContent(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete:
		return r.URL.Path != "/graphql" && r.URL.Path != "/api/graphql"
	}
	return false
}

// releasingBody gives back a request's concurrency slot once its body is read to the
// end or closed, whichever comes first: GitHub counts the request in flight until it
// has sent the whole answer, and go-github reads an error answer to its end without
// closing it (it closes a copy). A read that fails (the timeout ran out while the
// answer came, the connection broke) abandons the request: GitHub may still be
// sending it.
type releasingBody struct {
	io.ReadCloser
	once             sync.Once
	release, abandon func()
}

func (b *releasingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.once.Do(b.release)
	case err != nil:
		b.once.Do(b.abandon)
	}
	return n, err
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
