package ratelimit

import (
	"errors"
	"testing"
	"time"
)

// TestBurstThenRate: a caller gets its burst at once, is then refused with the
// wait for its next token, and gets one more once that wait has passed; another
// caller's bucket is its own, and a refusal takes nothing from the bucket.
func TestBurstThenRate(t *testing.T) {
	l, err := New("changes", 60, 3)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		if err := l.allowAt("shop", now); err != nil {
			t.Fatalf("action %d of a burst of 3 refused: %v", i+1, err)
		}
	}
	for range 5 {
		err := l.allowAt("shop", now)
		var refused *RefusedError
		if !errors.As(err, &refused) {
			t.Fatalf("action over the burst: %v, want a *RefusedError", err)
		}
		if refused.RetryAfter != time.Second || refused.RetryAfterSeconds() != 1 {
			t.Fatalf("retry after %s (%d s), want 1s at 60 a minute", refused.RetryAfter, refused.RetryAfterSeconds())
		}
		if want := "too many changes: at most 3 at once and 60 a minute; retry in 1 s"; err.Error() != want {
			t.Fatalf("refusal %q, want %q", err, want)
		}
	}
	if err := l.allowAt("billing", now); err != nil {
		t.Fatalf("another caller refused: %v", err)
	}
	if err := l.allowAt("shop", now.Add(time.Second)); err != nil {
		t.Fatalf("action a token's time later refused (refusals took tokens?): %v", err)
	}
	if err := l.allowAt("shop", now.Add(time.Second)); err == nil {
		t.Fatal("second action within one token's time allowed")
	}
}

func TestNilLimiterAllowsAll(t *testing.T) {
	var l *Limiter
	if err := l.Allow("shop"); err != nil {
		t.Fatal(err)
	}
}

func TestNewRefusesNonPositiveLimits(t *testing.T) {
	for _, c := range [][2]int{{0, 1}, {1, 0}, {-1, 5}} {
		if _, err := New("changes", c[0], c[1]); err == nil {
			t.Errorf("New(%d a minute, burst %d) accepted", c[0], c[1])
		}
	}
}

// TestRepeatOfAnAllowedActionTakesNothing: a key allowed once passes again
// however often and even with the bucket empty; a new key takes a token and is
// refused with the bucket empty; the same key of another caller is its own; an
// empty key is an action of its own each time.
func TestRepeatOfAnAllowedActionTakesNothing(t *testing.T) {
	l, err := New("changes", 60, 2)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 50 {
		if err := l.allowRepeatAt("shop", "same-key", now); err != nil {
			t.Fatalf("repeat %d of an allowed key refused: %v", i+1, err)
		}
	}
	if err := l.allowRepeatAt("shop", "", now); err != nil {
		t.Fatalf("the second token of the burst refused after repeats of one key: %v", err)
	}
	var refused *RefusedError
	if err := l.allowRepeatAt("shop", "new-key", now); !errors.As(err, &refused) {
		t.Fatalf("a new key with the bucket empty: %v, want a *RefusedError", err)
	}
	if err := l.allowRepeatAt("shop", "same-key", now); err != nil {
		t.Fatalf("the allowed key with the bucket empty refused: %v", err)
	}
	if err := l.allowRepeatAt("billing", "same-key", now); err != nil {
		t.Fatalf("another caller's first use of the key refused: %v", err)
	}
	if err := l.allowRepeatAt("shop", "new-key", now); !errors.As(err, &refused) {
		t.Fatalf("a refused key was remembered as allowed: %v", err)
	}
}
