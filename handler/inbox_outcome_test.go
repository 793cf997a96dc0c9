package handler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func TestInboxReportsEachRecordedOutcome(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		var mu sync.Mutex
		var got []string
		h := &recorder{events: []string{"push"}, handle: func(_ context.Context, id string) error {
			switch id {
			case "skip":
				return Skip("not a branch this service follows")
			case "bad":
				return Permanent(errors.New("unparsable payload"))
			case "flaky":
				return errors.New("github said 502")
			}
			return nil
		}}
		in, err := NewInbox(db, InboxOptions{MaxAttempts: 2, RetryBase: time.Hour, Outcome: func(event, outcome string) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, event+" "+outcome)
		}}, h)
		if err != nil {
			t.Fatal(err)
		}
		insert(t, db, "push", "ok", "skip", "bad", "flaky")
		insert(t, db, "ping", "unhandled")
		ctx := context.Background()
		if _, err := in.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		makeDue(t, db, "flaky")
		if _, err := in.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		sort.Strings(got)
		want := []string{"other ignored", "push failed", "push failed", "push processed", "push retried", "push skipped"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("outcomes %q, want %q", got, want)
		}
	})
}
