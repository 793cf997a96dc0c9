package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// recorder is an EventHandler that counts successful handlings per delivery and can
// be told to fail or block.
type recorder struct {
	events []string
	handle func(ctx context.Context, deliveryID string) error

	mu      sync.Mutex
	handled map[string]int
	calls   int
}

func (r *recorder) Handles() []string { return r.events }

func (r *recorder) Handle(ctx context.Context, eventType, deliveryID string, payload []byte) error {
	r.mu.Lock()
	r.calls++
	r.mu.Unlock()
	if r.handle != nil {
		if err := r.handle(ctx, deliveryID); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.handled == nil {
		r.handled = map[string]int{}
	}
	r.handled[deliveryID]++
	return nil
}

func (r *recorder) counts() (map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.handled))
	for k, v := range r.handled {
		out[k] = v
	}
	return out, r.calls
}

func insert(t *testing.T, db *store.DB, event string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := db.InsertWebhookDelivery(context.Background(), store.WebhookDelivery{DeliveryID: id, Event: event, Payload: []byte(`{"action":"x"}`)}); err != nil {
			t.Fatal(err)
		}
	}
}

func delivery(t *testing.T, db *store.DB, id string) store.WebhookDelivery {
	t.Helper()
	d, err := db.WebhookDeliveryByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestInboxDispatchesByEvent(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		push := &recorder{events: []string{"push"}}
		pr := &recorder{events: []string{"pull_request"}}
		in, err := NewInbox(db, InboxOptions{}, push, pr)
		if err != nil {
			t.Fatal(err)
		}
		insert(t, db, "push", "p1", "p2")
		insert(t, db, "pull_request", "r1")
		insert(t, db, "ping", "g1") // no handler: done without effect
		n, err := in.Drain(context.Background())
		if err != nil || n != 4 {
			t.Fatalf("Drain = %d, %v; want 4", n, err)
		}
		if got, _ := push.counts(); got["p1"] != 1 || got["p2"] != 1 || len(got) != 2 {
			t.Errorf("push handler saw %v", got)
		}
		if got, _ := pr.counts(); got["r1"] != 1 || len(got) != 1 {
			t.Errorf("pull_request handler saw %v", got)
		}
		for _, id := range []string{"p1", "p2", "r1", "g1"} {
			if d := delivery(t, db, id); d.State != store.DeliveryDone {
				t.Errorf("%s state = %s, want done", id, d.State)
			}
		}
	})
}

func TestNewInboxRefusesTwoHandlersForOneEvent(t *testing.T) {
	db := storetest.SQLite(t)
	if _, err := NewInbox(db, InboxOptions{}, &recorder{events: []string{"push"}}, &recorder{events: []string{"push"}}); err == nil {
		t.Fatal("NewInbox accepted two push handlers")
	}
}

func TestInboxRetriesWithBackoffThenFails(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		h := &recorder{events: []string{"push"}, handle: func(context.Context, string) error {
			return errors.New("github said 502")
		}}
		in, err := NewInbox(db, InboxOptions{MaxAttempts: 3, RetryBase: time.Hour}, h)
		if err != nil {
			t.Fatal(err)
		}
		insert(t, db, "push", "d1")
		ctx := context.Background()
		if _, err := in.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		d := delivery(t, db, "d1")
		if d.State != store.DeliveryPending || d.Attempts != 1 || d.LastError != "github said 502" {
			t.Fatalf("after one failure: %+v, want pending with the error", d)
		}
		// The backoff holds the delivery back: nothing is due.
		if n, _ := in.Drain(ctx); n != 0 {
			t.Fatalf("Drain processed %d deliveries during the backoff, want 0", n)
		}
		// Let the backoff pass (as if time went by) and exhaust the attempts.
		for attempt := 2; attempt <= 3; attempt++ {
			makeDue(t, db, "d1")
			if _, err := in.Drain(ctx); err != nil {
				t.Fatal(err)
			}
		}
		d = delivery(t, db, "d1")
		if d.State != store.DeliveryFailed || d.Attempts != 3 || d.LastError != "github said 502" || d.FinishedAt.IsZero() {
			t.Fatalf("after 3 attempts: %+v, want failed with the error kept", d)
		}
		if _, calls := h.counts(); calls != 3 {
			t.Errorf("handler called %d times, want 3", calls)
		}
	})
}

// makeDue ends a pending delivery's backoff, as if its time had come. The store has
// no such operation (the inbox never needs one), so the test edits the row.
func makeDue(t *testing.T, db *store.DB, id string) {
	t.Helper()
	res, err := db.ExecContext(context.Background(), db.Rebind(
		`UPDATE webhook_deliveries SET next_attempt_at = NULL WHERE delivery_id = ? AND state = ?`), id, store.DeliveryPending)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("make %s due: %d rows, %v; want one pending delivery", id, n, err)
	}
}

func TestInboxPermanentErrorAndPanicFailAtOnce(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		h := &recorder{events: []string{"push"}, handle: func(_ context.Context, id string) error {
			if id == "panics" {
				panic("nil map")
			}
			return Permanent(fmt.Errorf("failed to parse push event payload"))
		}}
		in, err := NewInbox(db, InboxOptions{}, h)
		if err != nil {
			t.Fatal(err)
		}
		insert(t, db, "push", "bad", "panics")
		if _, err := in.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[string]string{"bad": "failed to parse", "panics": "handler panicked: nil map"} {
			d := delivery(t, db, id)
			if d.State != store.DeliveryFailed || d.Attempts != 1 || !strings.Contains(d.LastError, want) {
				t.Errorf("%s = %+v, want failed after one attempt with %q", id, d, want)
			}
		}
	})
}

// TestInboxResumesAfterWorkerDies: a process killed while it holds a claimed batch
// (kill -9: nothing recorded, nothing handed back) loses none of it; a restarted
// process takes the batch once its lease has run out, and each delivery takes
// effect once.
func TestInboxResumesAfterWorkerDies(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		second := &recorder{events: []string{"push"}}
		// The restarted process's own claims do not run out here: only the dead
		// process's lease is on trial, and a short lease of its own would leave its
		// handlers no time on a loaded machine.
		in2, err := NewInbox(db, InboxOptions{Lease: time.Hour, BatchBudget: time.Hour}, second)
		if err != nil {
			t.Fatal(err)
		}
		// Whether the restarted process looked while the lease still held depends
		// on how long claiming and looking took, which grows with the machine's
		// load: a look that came after the lease proves nothing, so the dead
		// process claims new deliveries with a lease twice as long and it looks
		// again.
		var ids []string
		var claimedBy time.Time
		lease := 300 * time.Millisecond
		for try := 1; ; try, lease = try+1, lease*2 {
			ids = []string{fmt.Sprintf("d1-%d", try), fmt.Sprintf("d2-%d", try), fmt.Sprintf("d3-%d", try)}
			insert(t, db, "push", ids...)
			start := time.Now()
			// The dead process's workers got as far as claiming.
			claimed, err := db.ClaimWebhookDeliveries(context.Background(), claimBatch, lease)
			if err != nil || len(claimed) != 3 {
				t.Fatalf("claim = %d deliveries, %v; want 3", len(claimed), err)
			}
			claimedBy = time.Now()
			n, err := in2.Drain(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			// The lease runs out no sooner than start+lease (a millisecond less,
			// as the store keeps milliseconds): a claim returned before then took
			// deliveries whose lease still held.
			if looked := time.Since(start); looked < lease-time.Millisecond {
				t.Fatalf("re-claimed %d deliveries %v after they were claimed for %v, want 0 while the lease holds", n, looked, lease)
			}
			if lease > time.Minute {
				t.Fatalf("the restarted process never looked within the dead process's lease (last %v)", lease)
			}
		}
		// The lease runs out no later than claimedBy+lease.
		time.Sleep(time.Until(claimedBy.Add(lease + 10*time.Millisecond)))
		if n, err := in2.Drain(context.Background()); err != nil || n != 3 {
			t.Fatalf("Drain after the lease = %d, %v; want 3", n, err)
		}
		got, _ := second.counts()
		for _, id := range ids {
			if got[id] != 1 {
				t.Errorf("%s took effect %d times, want once", id, got[id])
			}
			if d := delivery(t, db, id); d.State != store.DeliveryDone || d.Attempts != 2 {
				t.Errorf("%s = %+v, want done on the second attempt", id, d)
			}
		}
	})
}

// TestInboxShutdownRecordsAndHandsBackItsBatch: a worker stopped in the middle of a
// batch records what it finished and hands the rest back, so another replica (or
// the restarted process) takes it at once rather than after the lease, and nothing
// finished runs again.
func TestInboxShutdownRecordsAndHandsBackItsBatch(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		insert(t, db, "push", "d1", "d2", "d3", "d4")
		ctx, stop := context.WithCancel(context.Background())
		first := &recorder{events: []string{"push"}, handle: func(hctx context.Context, id string) error {
			if id != "d2" {
				return nil
			}
			stop() // the process is told to stop while d2 runs
			<-hctx.Done()
			return hctx.Err()
		}}
		// An hour's lease: only a hand-back makes d2-d4 claimable within the test.
		in1, err := NewInbox(db, InboxOptions{Lease: time.Hour}, first)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := in1.Drain(ctx); err != nil || n != 1 {
			t.Fatalf("stopped Drain = %d, %v; want 1 (d1) and no error", n, err)
		}
		if d := delivery(t, db, "d1"); d.State != store.DeliveryDone || d.Attempts != 1 {
			t.Errorf("d1 = %+v, want done: it finished before the stop", d)
		}
		for _, id := range []string{"d2", "d3", "d4"} {
			if d := delivery(t, db, id); d.State != store.DeliveryPending || d.Attempts != 1 || d.FreeAttempts != 1 {
				t.Errorf("%s = %+v, want pending again, its attempt not counted", id, d)
			}
		}

		second := &recorder{events: []string{"push"}}
		in2, err := NewInbox(db, InboxOptions{Lease: time.Hour}, second)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := in2.Drain(context.Background()); err != nil || n != 3 {
			t.Fatalf("the other process drained %d, %v; want d2-d4 at once", n, err)
		}
		firstGot, _ := first.counts()
		got, _ := second.counts()
		for _, id := range []string{"d1", "d2", "d3", "d4"} {
			if firstGot[id]+got[id] != 1 {
				t.Errorf("%s took effect %d times, want once", id, firstGot[id]+got[id])
			}
			if d := delivery(t, db, id); d.State != store.DeliveryDone {
				t.Errorf("%s = %+v, want done", id, d)
			}
		}
	})
}

// TestInboxSlowDeliveryDoesNotHoldItsBatch: once a batch has run for its budget, the
// deliveries of it not started yet go back to the inbox, where another worker takes
// them while the slow one still runs.
func TestInboxSlowDeliveryDoesNotHoldItsBatch(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		insert(t, db, "push", "slow", "then1", "then2")
		slowStarted, finishSlow := make(chan struct{}), make(chan struct{})
		h := &recorder{events: []string{"push"}, handle: func(_ context.Context, id string) error {
			if id == "slow" {
				close(slowStarted)
				<-finishSlow
			}
			return nil
		}}
		// A lease far longer than the test, and a budget the slow delivery overruns.
		in, err := NewInbox(db, InboxOptions{Lease: time.Hour, BatchBudget: time.Millisecond}, h)
		if err != nil {
			t.Fatal(err)
		}
		first := make(chan error, 1)
		go func() {
			_, err := in.Drain(context.Background())
			first <- err
		}()
		<-slowStarted
		// Another worker takes the rest of the batch while the slow delivery still
		// runs; without the hand-back it finds nothing claimable until the lease ends.
		var otherErr error
		deadline := time.Now().Add(30 * time.Second)
		for {
			if got, _ := h.counts(); got["then1"] == 1 && got["then2"] == 1 {
				break
			}
			if time.Now().After(deadline) {
				otherErr = errors.New("then1 and then2 were not handled while the slow delivery ran")
				break
			}
			if _, err := in.Drain(context.Background()); err != nil {
				otherErr = err
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(finishSlow)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if otherErr != nil {
			t.Fatal(otherErr)
		}
		got, _ := h.counts()
		for _, id := range []string{"slow", "then1", "then2"} {
			if got[id] != 1 {
				t.Errorf("%s handled %d times, want once", id, got[id])
			}
			if d := delivery(t, db, id); d.State != store.DeliveryDone {
				t.Errorf("%s = %+v, want done", id, d)
			}
		}
	})
}

func TestTwoProcessesShareOneInboxExactlyOnce(t *testing.T) {
	for _, dialect := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(dialect), func(t *testing.T) {
			// Two "processes": two connection pools on one database, each with its
			// own inbox and workers.
			db, other := storetest.TwoPools(t, dialect)

			const total = 200
			ids := make([]string, total)
			for i := range ids {
				ids[i] = fmt.Sprintf("d%03d", i)
			}
			insert(t, db, "push", ids...)

			var mu sync.Mutex
			seen := map[string]int{}
			mk := func() *recorder {
				return &recorder{events: []string{"push"}, handle: func(_ context.Context, id string) error {
					mu.Lock()
					seen[id]++
					mu.Unlock()
					// A little work, so both processes are busy at the same time and
					// a delivery claimed twice would be handled twice.
					time.Sleep(time.Millisecond)
					return nil
				}}
			}
			rec1, rec2 := mk(), mk()
			in1, err := NewInbox(db, InboxOptions{Workers: 4, PollInterval: 5 * time.Millisecond}, rec1)
			if err != nil {
				t.Fatal(err)
			}
			in2, err := NewInbox(other, InboxOptions{Workers: 4, PollInterval: 5 * time.Millisecond}, rec2)
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for _, in := range []*Inbox{in1, in2} {
				wg.Add(1)
				go func() { defer wg.Done(); in.Run(ctx) }()
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				mu.Lock()
				n := len(seen)
				mu.Unlock()
				if n == total || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			// Give a duplicate, were there one, the time to happen.
			time.Sleep(100 * time.Millisecond)
			stop()
			wg.Wait()
			for i, rec := range []*recorder{rec1, rec2} {
				if got, _ := rec.counts(); len(got) == 0 {
					t.Errorf("process %d handled no delivery; the test did not exercise two processes at once", i+1)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if seen[id] != 1 {
					t.Errorf("delivery %s processed %d times, want exactly once", id, seen[id])
				}
				// A batch that overran its budget handed its unstarted deliveries back
				// (free attempts, which ran nothing): what counts is that each ran once.
				if d := delivery(t, db, id); d.State != store.DeliveryDone || d.Attempts-d.FreeAttempts != 1 {
					t.Errorf("delivery %s: state %s after %d attempts (%d handed back unstarted), want done after 1 run", id, d.State, d.Attempts, d.FreeAttempts)
				}
			}
		})
	}
}

// TestInboxLateOutcomeOfAnOverrunHandlerIsDropped: a handler that ignores its context
// and outlives its lease must not overwrite the outcome of the worker that claimed
// the delivery after the lease ran out.
func TestInboxLateOutcomeOfAnOverrunHandlerIsDropped(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		const lease = 300 * time.Millisecond
		started, release := make(chan struct{}), make(chan struct{})
		// The attempt the stubborn handler runs on: a claim whose lease was nearly
		// over before its handler could start (a loaded machine) was handed back
		// and claimed again, each such attempt counted but free.
		var stubbornAttempt int
		stubborn := &recorder{events: []string{"push"}, handle: func(_ context.Context, id string) error {
			d, err := db.WebhookDeliveryByID(context.Background(), id)
			if err != nil {
				t.Error(err)
			}
			stubbornAttempt = d.Attempts
			close(started)
			<-release // ignores its context, well past the lease
			return nil
		}}
		failing := &recorder{events: []string{"push"}, handle: func(context.Context, string) error {
			return errors.New("second attempt failed")
		}}
		first, err := NewInbox(db, InboxOptions{Lease: lease}, stubborn)
		if err != nil {
			t.Fatal(err)
		}
		// The second worker's own lease is long: a short one could run nearly out
		// before its handler starts on a loaded machine, handing the delivery back
		// for another attempt instead of failing this one.
		second, err := NewInbox(db, InboxOptions{Lease: time.Hour, RetryBase: time.Hour}, failing)
		if err != nil {
			t.Fatal(err)
		}
		insert(t, db, "push", "d1")

		var logs bytes.Buffer
		firstCtx := zerolog.New(&logs).WithContext(context.Background())
		type drained struct {
			n   int
			err error
		}
		firstDone := make(chan drained, 1)
		go func() {
			n, err := first.Drain(firstCtx)
			firstDone <- drained{n, err}
		}()
		<-started

		// Once the lease has run out, the second worker claims the delivery and its
		// attempt fails, to be retried after a backoff.
		deadline := time.Now().Add(60 * time.Second)
		for {
			n, err := second.Drain(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the second worker never claimed the delivery after the lease ran out")
			}
			time.Sleep(20 * time.Millisecond)
		}

		close(release)
		if got := <-firstDone; got.err != nil {
			t.Fatalf("first worker's Drain = %d, %v; want no error for the lost lease", got.n, got.err)
		}
		d := delivery(t, db, "d1")
		if d.State != store.DeliveryPending || d.Attempts != stubbornAttempt+1 || d.LastError != "second attempt failed" {
			t.Errorf("d1 = %+v, want pending after the failed attempt %d", d, stubbornAttempt+1)
		}
		if n, _ := second.Drain(context.Background()); n != 0 {
			t.Errorf("d1 claimed during the second attempt's backoff: the late outcome reset it")
		}

		var warned bool
		for line := range strings.Lines(logs.String()) {
			var entry map[string]any
			if err := json.Unmarshal([]byte(line), &entry); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if entry["level"] == "warn" && entry[LogKeyDeliveryID] == "d1" && entry["attempt"] == float64(stubbornAttempt) &&
				strings.Contains(fmt.Sprint(entry["error"]), store.ErrLeaseLost.Error()) {
				warned = true
			}
		}
		if !warned {
			t.Errorf("no warning naming d1, attempt %d and the lost lease; logs:\n%s", stubbornAttempt, logs.String())
		}
	})
}

// TestInboxHandlerDeadlineCountsFromTheClaim: deliveries later in a batch have spent
// part of their lease waiting, so their handlers get only what is left of it, and
// none when it is nearly over: such a delivery goes back to the inbox and runs on a
// fresh claim, its first attempt not counted.
func TestInboxHandlerDeadlineCountsFromTheClaim(t *testing.T) {
	// The lease is long enough that claiming and recording d1 fit in what is left of
	// it with seconds to spare on a loaded machine; only d1's own time decides.
	const lease = 3 * time.Second
	tests := map[string]struct {
		firstTakes  time.Duration
		wantAttempt int // the attempt on which d2 is handled
	}{
		"second delivery gets what is left of the lease": {firstTakes: 200 * time.Millisecond, wantAttempt: 1},
		// Past the handler deadline (the lease less a tenth) whatever the load.
		"second delivery left for a later claim": {firstTakes: lease - lease/20, wantAttempt: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			storetest.ForEach(t, func(t *testing.T, db *store.DB) {
				insert(t, db, "push", "d1")
				insert(t, db, "push", "d2")
				var second store.WebhookDelivery
				var secondDeadline time.Time
				h := &recorder{events: []string{"push"}, handle: func(ctx context.Context, id string) error {
					if id == "d1" {
						time.Sleep(tc.firstTakes) // within the lease, ignoring the context
						return nil
					}
					secondDeadline, _ = ctx.Deadline()
					second = delivery(t, db, id)
					return nil
				}}
				// No hand-back by budget: the lease alone decides here.
				in, err := NewInbox(db, InboxOptions{Lease: lease, BatchBudget: time.Hour}, h)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := in.Drain(context.Background()); err != nil {
					t.Fatal(err)
				}
				got, _ := h.counts()
				if got["d1"] != 1 || got["d2"] != 1 {
					t.Fatalf("handled d1 %d and d2 %d times, want once each", got["d1"], got["d2"])
				}
				if second.Attempts != tc.wantAttempt || second.FreeAttempts != tc.wantAttempt-1 {
					t.Errorf("d2 handled on attempt %d with %d free, want attempt %d with %d free",
						second.Attempts, second.FreeAttempts, tc.wantAttempt, tc.wantAttempt-1)
				}
				if secondDeadline.IsZero() || !secondDeadline.Before(second.LeaseExpiresAt) {
					t.Errorf("d2's handler deadline %v is not before its lease expiry %v", secondDeadline, second.LeaseExpiresAt)
				}
			})
		})
	}
}
