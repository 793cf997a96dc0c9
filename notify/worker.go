package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/internal/poll"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
	"github.com/kukie/kukie-gitops/textcut"
)

// Defaults of a Worker's zero fields.
const (
	DefaultPauseAfter   = 10
	DefaultPoll         = 2 * time.Second
	DefaultLease        = time.Minute
	DefaultSendTimeout  = 10 * time.Second
	DefaultFirstBackoff = 5 * time.Second
	DefaultMaxBackoff   = 10 * time.Minute
	// DefaultRetention is how long a delivered notification stays in the log.
	DefaultRetention     = 30 * 24 * time.Hour
	DefaultPruneInterval = time.Hour
	claimBatch           = 20
	maxErrorText         = 300
)

// Worker delivers the outbox: each due delivery is signed and POSTed to its
// endpoint; a 2xx answer delivers it, anything else is retried with exponential
// backoff. Deliveries of one plan (or one connection) go in order: the next waits
// until the one before is delivered. An endpoint that fails PauseAfter times in a
// row is paused, its deliveries kept until it is resumed. Several workers (replicas)
// may run: a claimed delivery is leased, and a lease that runs out (a worker died
// mid-send) frees it again, so a delivery is sent at least once.
type Worker struct {
	Store       *store.DB
	Credentials *sealed.Box
	// Client sends deliveries; nil uses one with DefaultSendTimeout that connects
	// only to public addresses (see AllowPrivateNetworks). Redirects are never
	// followed: an endpoint answers where it was registered.
	Client *http.Client
	// AllowPrivateNetworks lets the default client reach loopback, private and
	// link-local addresses.
	AllowPrivateNetworks bool
	// Retention is how long a delivered notification is kept; older ones are
	// deleted every PruneInterval. Zero values take the defaults.
	Retention, PruneInterval time.Duration
	// Outcome, when set, counts each attempt: event and "delivered" or "failed".
	Outcome func(event, outcome string)
	// Now is the clock, for tests; nil is time.Now.
	Now        func() time.Time
	PauseAfter int
	Poll       time.Duration
	Lease      time.Duration
	// FirstBackoff doubles with each failed attempt up to MaxBackoff.
	FirstBackoff time.Duration
	MaxBackoff   time.Duration

	clientOnce    sync.Once
	defaultClient *http.Client
	// drain is what Run calls for Drain; nil is Drain. For tests of a store that
	// fails.
	drain func(context.Context) (int, error)
}

func (w *Worker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Worker) client() *http.Client {
	if w.Client != nil {
		return w.Client
	}
	w.clientOnce.Do(func() {
		if w.AllowPrivateNetworks {
			w.defaultClient = openClient(DefaultSendTimeout)
		} else {
			w.defaultClient = guardedClient(DefaultSendTimeout)
		}
	})
	return w.defaultClient
}

// backoff is the wait before attempt n+1 after n failed attempts.
func (w *Worker) backoff(failed int) time.Duration {
	first, limit := w.FirstBackoff, w.MaxBackoff
	if first <= 0 {
		first = DefaultFirstBackoff
	}
	if limit <= 0 {
		limit = DefaultMaxBackoff
	}
	d := first
	for i := 1; i < failed && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Run delivers until ctx is cancelled, looking for due deliveries every Poll, and
// prunes the delivery log every PruneInterval.
func (w *Worker) Run(ctx context.Context) {
	every := w.Poll
	if every <= 0 {
		every = DefaultPoll
	}
	pruneEvery := w.PruneInterval
	if pruneEvery <= 0 {
		pruneEvery = DefaultPruneInterval
	}
	drain := w.drain
	if drain == nil {
		drain = w.Drain
	}
	var pruned time.Time
	// While the store fails, the first failure is logged and then one line a
	// minute, and the wait between tries grows: see poll.Loop.
	poll.Loop{
		Interval:  every,
		Failed:    "Notification delivery failed",
		Recovered: "Notification delivery recovered",
		Now:       w.Now,
	}.Run(ctx, func(ctx context.Context) error {
		_, err := drain(ctx)
		// Pruning is tried once a PruneInterval whatever the drain did, so its
		// failures are rare enough to log each.
		if now := w.now(); now.Sub(pruned) >= pruneEvery {
			pruned = now
			if _, err := w.Prune(ctx); err != nil && ctx.Err() == nil {
				zerolog.Ctx(ctx).Error().Err(err).Msg("Pruning the notification delivery log failed")
			}
		}
		return err
	})
}

// Drain sends every delivery due now, in order, and returns how many attempts it
// made; a delivery that fails is due again only after its backoff.
func (w *Worker) Drain(ctx context.Context) (int, error) {
	lease := w.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	pauseAfter := w.PauseAfter
	if pauseAfter <= 0 {
		pauseAfter = DefaultPauseAfter
	}
	attempts := 0
	for ctx.Err() == nil {
		due, err := w.Store.ClaimDueNotifications(ctx, w.now(), lease, claimBatch)
		if err != nil {
			return attempts, err
		}
		if len(due) == 0 {
			return attempts, nil
		}
		for _, d := range due {
			a := w.send(ctx, d)
			if w.Outcome != nil {
				w.Outcome(d.Event, map[bool]string{true: "delivered", false: "failed"}[a.OK])
			}
			if !a.OK {
				a.NextAttemptAt = w.now().Add(w.backoff(d.Attempts + 1))
				zerolog.Ctx(ctx).Warn().Str("delivery", d.ID).Str("endpoint", d.EndpointID).Int("status", a.Status).
					Str("error", a.Error).Time("next_attempt_at", a.NextAttemptAt).Msg("Notification not delivered")
			}
			if err := w.Store.RecordNotificationAttempt(ctx, d, a, w.now(), pauseAfter); err != nil {
				return attempts, err
			}
			attempts++
		}
	}
	return attempts, ctx.Err()
}

// Prune deletes delivered notifications older than Retention and returns how many.
func (w *Worker) Prune(ctx context.Context) (int64, error) {
	retention := w.Retention
	if retention <= 0 {
		retention = DefaultRetention
	}
	n, err := w.Store.PruneNotificationDeliveries(ctx, w.now().Add(-retention))
	if err != nil {
		return 0, fmt.Errorf("prune notification deliveries: %w", err)
	}
	if n > 0 {
		zerolog.Ctx(ctx).Info().Int64("deleted", n).Dur("retention", retention).Msg("Pruned delivered notifications")
	}
	return n, nil
}

// send makes one attempt.
func (w *Worker) send(ctx context.Context, d store.NotificationDelivery) store.DeliveryAttempt {
	ep, err := w.Store.NotificationEndpoint(ctx, d.EndpointID)
	if err != nil {
		return store.DeliveryAttempt{Error: "read endpoint: " + err.Error()}
	}
	key, err := w.Credentials.Open(ep.SealedSecret, associatedData(ep.TeamID, ep.URL))
	if errors.Is(err, sealed.ErrNoKey) {
		return store.DeliveryAttempt{Error: "no encryption key is configured to open the endpoint's secret"}
	}
	if err != nil {
		return store.DeliveryAttempt{Error: "open the endpoint's secret: " + err.Error()}
	}
	ts := w.now().Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(d.Payload))
	if err != nil {
		return store.DeliveryAttempt{Error: "build request: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "kukie-gitops-notifications")
	req.Header.Set(HeaderEvent, d.Event)
	req.Header.Set(HeaderDelivery, d.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(key, ts, d.Payload))
	client := *w.client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return store.DeliveryAttempt{Error: truncate(err.Error())}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The status line is the endpoint's to write, of any length (up to the
		// client's header bound, megabytes) and any bytes: it is cut and cleaned
		// like an error.
		return store.DeliveryAttempt{Status: resp.StatusCode, Error: truncate("the endpoint answered " + resp.Status)}
	}
	return store.DeliveryAttempt{OK: true, Status: resp.StatusCode}
}

// truncate makes text of the endpoint's (an error naming its address, its status
// line) fit the delivery log: valid UTF-8 without control characters (PostgreSQL
// stores no NUL, nor bytes that are not UTF-8), cut at maxErrorText bytes on a
// character's boundary.
func truncate(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	return textcut.Cut(s, maxErrorText)
}
