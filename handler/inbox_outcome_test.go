package handler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
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

// TestInboxRecordsAnyErrorAsText: the error or skip reason kept on a delivery is
// text the store takes, whatever the handler's error holds: one cut at the length
// kept ends at a whole character, and bytes that are no UTF-8 (a file name of a
// repository, quoted in an error) and NUL characters (valid UTF-8, yet no text
// PostgreSQL stores; the NUL cases failed before) are replaced. Before,
// PostgreSQL refused the record, the worker failed its batch, and the delivery
// was claimed and failed the same way again after every lease.
func TestInboxRecordsAnyErrorAsText(t *testing.T) {
	long := strings.Repeat("a", maxErrorLength-1) + "é and more"
	cases := map[string]struct {
		err  error
		want string
	}{
		"cut in a character":                {err: Permanent(errors.New(long)), want: strings.Repeat("a", maxErrorLength-1) + "…"},
		"bytes that are no text":            {err: Permanent(errors.New("render apps/\xff\xfe.yaml: bad")), want: "render apps/\uFFFD.yaml: bad"},
		"a skip cut in a character":         {err: Skip("%s", long), want: strings.Repeat("a", maxErrorLength-1) + "…"},
		"a retry of bytes that are no text": {err: errors.New("github said \xff"), want: "github said \uFFFD"},
		"a NUL character":                   {err: Permanent(errors.New("github said \x00 then")), want: "github said \uFFFD then"},
		"a skip of a NUL character":         {err: Skip("%s", "plan \x00"), want: "plan \uFFFD"},
	}
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				id := strings.ReplaceAll(name, " ", "-")
				h := &recorder{events: []string{"push"}, handle: func(context.Context, string) error { return tc.err }}
				in, err := NewInbox(db, InboxOptions{}, h)
				if err != nil {
					t.Fatal(err)
				}
				insert(t, db, "push", id)
				if _, err := in.Drain(context.Background()); err != nil {
					t.Fatalf("drain: %v", err)
				}
				d := delivery(t, db, id)
				if got := d.LastError + d.SkipReason; got != tc.want {
					t.Errorf("delivery %s kept %q, want %q", d.State, got, tc.want)
				}
			})
		}
	})
}
