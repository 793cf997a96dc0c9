package plan

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kukie/kukie-gitops/store"
)

// renewalsPerTTL is how many times a claim is renewed within its lifetime while its
// holder works: two renewals may fail to arrive in time before the claim runs out.
const renewalsPerTTL = 3

// A claim keeps other workers off a plan only while it lasts, and a step can take
// longer than its lifetime (one slow GitHub call does). So a held claim is renewed
// in the background for as long as its holder works, and every effect is fenced by
// it: before each GitHub write the claim is renewed on the spot (fence), and each
// recorded step is written only if the claim's epoch still holds the plan
// (store.UpdateClaimedPlan). The moment a renewal fails the work context is
// cancelled, which also aborts the GitHub call in flight.
//
// What this cannot close is a write that GitHub applied while its worker was losing
// the claim. It is bounded: the holder renews while it works and stops as soon as it
// cannot; another worker takes the plan over only after the claim expired, which
// cannot happen during a single GitHub call since the fence renewed the claim for a
// full lifetime just before it and config requires that lifetime to exceed the GitHub
// request timeout; and a write made but not recorded is adopted by the next holder
// (the commit on the kukie branch, the open pull request of the branch, the check
// run with the plan's external id), so it is never made twice.
type heldClaim struct {
	db   *store.DB
	code string
	ttl  time.Duration
	// cancel stops the holder's work with the reason the claim was lost.
	cancel context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{}

	mu    sync.Mutex
	claim store.PlanClaim
	// validUntil is when the claim runs out by this process's clock: renewals are
	// abandoned before it, so the holder never works on a claim it may have lost.
	validUntil time.Time
	lost       error
}

type heldClaimKey struct{}

// hold claims a plan for this worker and keeps the claim alive until end is called.
// The returned context carries the claim (for fence and save) and is cancelled, with
// an error wrapping store.ErrClaimLost as its cause, when the claim cannot be
// renewed. ok is false when another worker holds the plan.
func (p *Pipeline) hold(ctx context.Context, code string) (context.Context, *heldClaim, bool, error) {
	start := time.Now()
	c, ok, err := p.db.ClaimPlan(ctx, code, p.cfg.WorkerID, p.cfg.ClaimTTL)
	if err != nil || !ok {
		return ctx, nil, ok, err
	}
	wctx, cancel := context.WithCancelCause(ctx)
	h := &heldClaim{db: p.db, code: code, ttl: p.cfg.ClaimTTL, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{}),
		claim: c, validUntil: start.Add(p.cfg.ClaimTTL)}
	go h.keepAlive(wctx)
	return context.WithValue(wctx, heldClaimKey{}, h), h, true, nil
}

// heldFor returns the claim ctx carries for plan code, or nil: work for one plan may
// touch others (waking the plans waiting on its locks), which are not fenced by it.
func heldFor(ctx context.Context, code string) *heldClaim {
	h, _ := ctx.Value(heldClaimKey{}).(*heldClaim)
	if h == nil || h.code != code {
		return nil
	}
	return h
}

func (h *heldClaim) keepAlive(ctx context.Context) {
	defer close(h.done)
	t := time.NewTicker(h.ttl / renewalsPerTTL)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := h.renew(ctx); err != nil {
			return
		}
	}
}

// renew extends the claim, or records it as lost and cancels the holder's work. A
// renewal that cannot finish well before the claim runs out counts as failed.
func (h *heldClaim) renew(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost != nil {
		return h.lost
	}
	rctx, cancel := context.WithDeadline(ctx, h.validUntil.Add(-h.ttl/(2*renewalsPerTTL)))
	defer cancel()
	start := time.Now()
	c, err := h.db.RenewPlanClaim(rctx, h.claim, h.ttl)
	if err != nil {
		return h.loseLocked(err)
	}
	h.claim, h.validUntil = c, start.Add(h.ttl)
	return nil
}

// lose records the claim as lost for err and cancels the holder's work.
func (h *heldClaim) lose(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_ = h.loseLocked(err)
}

func (h *heldClaim) loseLocked(err error) error {
	if h.lost != nil {
		return h.lost
	}
	if !errors.Is(err, store.ErrClaimLost) {
		// The renewal failed for another reason (the database is slow or away):
		// the claim may run out before the next try, so it counts as lost.
		err = fmt.Errorf("%w: %w", store.ErrClaimLost, err)
	}
	h.lost = err
	h.cancel(err)
	return err
}

// end stops renewing; with release the claim is given up so another worker may take
// the plan at once (a simulated crash keeps it, as a dead process would).
func (h *heldClaim) end(ctx context.Context, release bool) {
	close(h.stop)
	<-h.done
	h.cancel(context.Canceled)
	if release {
		// Fenced by epoch: a claim already lost is left to its new holder.
		_ = h.db.ReleasePlanClaim(context.WithoutCancel(ctx), h.current())
	}
}

// lostErr is why the claim was lost, or nil.
func (h *heldClaim) lostErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// fence renews the claim ctx holds on plan code right before an effect outside the
// store (a GitHub write): the effect starts with a full claim lifetime ahead of it,
// or not at all when the claim was lost. Without a claim in ctx (webhooks, API
// calls) there is nothing to fence.
func (p *Pipeline) fence(ctx context.Context, code string) error {
	h := heldFor(ctx, code)
	if h == nil {
		return nil
	}
	if err := h.renew(ctx); err != nil {
		return fmt.Errorf("%w: %w", errStopped, err)
	}
	return nil
}

// current is the claim as last renewed.
func (h *heldClaim) current() store.PlanClaim {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.claim
}
