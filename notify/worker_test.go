package notify

import (
	"slices"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/internal/poll/polltest"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// A worker whose store keeps failing logs the first failure and not one line per
// poll, and once at Info when delivering works again. Its clock stands still, far
// inside the minute between two failure lines.
func TestWorkerLogsAStoreOutageOnceAndItsEnd(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	outage, ctx := polltest.Start(t, 4)
	w := &Worker{Store: storetest.SQLite(t), Poll: time.Millisecond, Now: func() time.Time { return now }, drain: outage.Drain}
	w.Run(ctx)
	want := []string{"error: Notification delivery failed", "info: Notification delivery recovered after 4 failures"}
	if got := outage.Logged(t); !slices.Equal(got, want) {
		t.Errorf("logged %q, want %q", got, want)
	}
}
