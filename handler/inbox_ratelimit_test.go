package handler

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// nextAttemptAt reads when a pending delivery is due. The store does not expose it
// (only claims use it), so the test reads the row.
func nextAttemptAt(t *testing.T, db *store.DB, id string) time.Time {
	t.Helper()
	var ms int64
	if err := db.QueryRowxContext(context.Background(), db.Rebind(`SELECT next_attempt_at FROM webhook_deliveries WHERE delivery_id = ?`), id).Scan(&ms); err != nil {
		t.Fatal(err)
	}
	return time.UnixMilli(ms)
}

// TestInboxWaitsOutGitHubsRateLimits: a handler stopped by GitHub's rate limit (its
// own go-github call answered by the fake the way GitHub answers) is retried no
// earlier than the time GitHub named, and the attempt does not count toward giving
// up: with a budget of one attempt the delivery is still pending after each limit,
// while a plain 502 afterwards uses the budget up.
func TestInboxWaitsOutGitHubsRateLimits(t *testing.T) {
	reset := time.Now().Add(37 * time.Minute).Truncate(time.Second)
	secondary429 := githubtest.SecondaryRateLimit(90 * time.Second)
	secondary429.Status = http.StatusTooManyRequests
	limits := []struct {
		name  string
		fault githubtest.Fault
		// notBefore is the earliest allowed retry, given when the request was made.
		notBefore func(sent time.Time) time.Time
	}{
		{"primary", githubtest.PrimaryRateLimit(reset), func(time.Time) time.Time { return reset }},
		{"secondary", githubtest.SecondaryRateLimit(2 * time.Minute), func(sent time.Time) time.Time { return sent.Add(2 * time.Minute) }},
		{"secondary as 429", secondary429, func(sent time.Time) time.Time { return sent.Add(90 * time.Second) }},
	}
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := githubtest.New(t)
		s.CreateRepo(t, "acme", "deploy", map[string]string{"f": "1\n"}, "main")
		id := s.CreateInstallation(t, "acme", "deploy")
		for i, limit := range limits {
			// A fresh client per limit: go-github remembers a limit and would refuse
			// the next request itself (with the same times, which RetryAt reads too).
			c, err := gh.NewClient(s.Client()).WithAuthToken(s.InstallationToken(t, id, nil, nil).Reveal()).WithEnterpriseURLs(s.URL(), s.URL())
			if err != nil {
				t.Fatal(err)
			}
			remove := s.InjectFault(limit.fault.On(http.MethodGet, "/repos/*/*"))
			var sent time.Time
			h := &recorder{events: []string{"push"}, handle: func(ctx context.Context, _ string) error {
				sent = time.Now()
				_, _, err := c.Repositories.Get(ctx, "acme", "deploy")
				return err
			}}
			in, err := NewInbox(db, InboxOptions{MaxAttempts: 1, RetryBase: time.Millisecond}, h)
			if err != nil {
				t.Fatal(err)
			}
			did := "d" + string(rune('a'+i))
			insert(t, db, "push", did)
			if _, err := in.Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
			d := delivery(t, db, did)
			if d.State != store.DeliveryPending || d.Attempts != 1 || d.FreeAttempts != 1 {
				t.Fatalf("%s: after a rate-limited attempt %+v, want pending with the attempt not counted", limit.name, d)
			}
			// The store keeps milliseconds: a retry due at the very instant GitHub
			// named reads back up to a millisecond earlier.
			if at, want := nextAttemptAt(t, db, did), limit.notBefore(sent).Truncate(time.Millisecond); at.Before(want) {
				t.Fatalf("%s: retry due at %v, before GitHub's %v", limit.name, at, want)
			}
			remove()
		}

		// A plain failure counts: the budget of one attempt is used up.
		h := &recorder{events: []string{"push"}, handle: func(context.Context, string) error { return errors.New("github said 502") }}
		in, err := NewInbox(db, InboxOptions{MaxAttempts: 1, RetryBase: time.Millisecond}, h)
		if err != nil {
			t.Fatal(err)
		}
		makeDue(t, db, "da")
		if _, err := in.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := delivery(t, db, "da"); d.State != store.DeliveryFailed || d.Attempts != 2 {
			t.Fatalf("after a plain failure: %+v, want failed", d)
		}
	})
}

// TestInboxPrunesDoneDeliveriesAfterRetention: done deliveries older than the
// retention are deleted; failed and pending ones, and recent done ones, stay.
func TestInboxPrunesDoneDeliveriesAfterRetention(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		h := &recorder{events: []string{"push"}, handle: func(_ context.Context, id string) error {
			if id == "bad" {
				return Permanent(errors.New("bad payload"))
			}
			return nil
		}}
		insert(t, db, "push", "old", "bad")
		in, err := NewInbox(db, InboxOptions{}, h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		insert(t, db, "push", "waiting")
		// With the default retention nothing is old enough.
		if n, err := in.Prune(ctx); err != nil || n != 0 {
			t.Fatalf("prune with 30 days of retention = %d, %v; want 0", n, err)
		}
		// Finish times are kept in milliseconds: let the done delivery's be past.
		time.Sleep(2 * time.Millisecond)
		short, err := NewInbox(db, InboxOptions{Retention: time.Nanosecond}, h)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := short.Prune(ctx); err != nil || n != 1 {
			t.Fatalf("prune = %d, %v; want the one done delivery", n, err)
		}
		if _, err := db.WebhookDeliveryByID(ctx, "old"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("done delivery kept: %v", err)
		}
		if d := delivery(t, db, "bad"); d.State != store.DeliveryFailed {
			t.Errorf("failed delivery: %+v", d)
		}
		if d := delivery(t, db, "waiting"); d.State != store.DeliveryPending {
			t.Errorf("pending delivery: %+v", d)
		}
	})
}
