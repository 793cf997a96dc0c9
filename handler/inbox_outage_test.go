package handler

import (
	"slices"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/internal/poll/polltest"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// A worker whose store keeps failing logs the first failure and not one line per
// poll, and once at Info when draining works again. Its drains here fail five
// times within milliseconds, far inside the minute between two failure lines.
func TestInboxWorkerLogsAStoreOutageOnceAndItsEnd(t *testing.T) {
	in, err := NewInbox(storetest.SQLite(t), InboxOptions{PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	outage, ctx := polltest.Start(t, 5)
	in.drain = outage.Drain
	in.work(ctx)
	want := []string{"error: Webhook inbox worker failed to process deliveries", "info: Webhook inbox worker recovered after 5 failures"}
	if got := outage.Logged(t); !slices.Equal(got, want) {
		t.Errorf("logged %q, want %q", got, want)
	}
}
