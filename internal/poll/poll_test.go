package poll

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// logLine is what the tests read of a logged line.
type logLine struct {
	Level      string  `json:"level"`
	Message    string  `json:"message"`
	Failures   int     `json:"failures"`
	Suppressed int     `json:"suppressed"`
	RetryIn    float64 `json:"retry_in"` // milliseconds
}

// parseLog reads the JSON lines zerolog wrote to buf.
func parseLog(t *testing.T, buf *bytes.Buffer) []logLine {
	t.Helper()
	var lines []logLine
	for _, raw := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if raw == "" {
			continue
		}
		var l logLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		lines = append(lines, l)
	}
	return lines
}

// A run of failures is logged at its first, then at most once a LogEvery with the
// failures left out counted, and its end once at Info; the wait between tries
// doubles up to MaxBackoff. The clock moves 25s with each drain, so a line is due
// every third failure.
func TestFailuresAreLoggedOnceALogEveryAndTheRecoveryOnce(t *testing.T) {
	var buf bytes.Buffer
	logger := zerolog.New(&buf)
	ctx, cancel := context.WithCancel(logger.WithContext(context.Background()))
	defer cancel()

	clock := time.Unix(0, 0)
	outcomes := []bool{false, false, false, false, false, false, false, true, false, true}
	calls := 0
	Loop{
		Interval: time.Millisecond, MaxBackoff: 4 * time.Millisecond, LogEvery: time.Minute,
		Failed: "Drain failed", Recovered: "Drain recovered",
		Now: func() time.Time { return clock },
	}.Run(ctx, func(context.Context) error {
		clock = clock.Add(25 * time.Second)
		calls++
		if calls > len(outcomes) {
			cancel()
			return context.Canceled
		}
		if outcomes[calls-1] {
			return nil
		}
		return errors.New("database is down")
	})

	type want struct {
		level, message       string
		failures, suppressed int
	}
	wants := []want{
		{"error", "Drain failed", 1, 0},
		{"error", "Drain failed", 4, 2},
		{"error", "Drain failed", 7, 2},
		{"info", "Drain recovered after 7 failures", 7, 0},
		{"error", "Drain failed", 1, 0},
		{"info", "Drain recovered after 1 failure", 1, 0},
	}
	lines := parseLog(t, &buf)
	if len(lines) != len(wants) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(wants), buf.String())
	}
	for i, w := range wants {
		l := lines[i]
		if l.Level != w.level || l.Message != w.message || l.Failures != w.failures || l.Suppressed != w.suppressed {
			t.Errorf("line %d = %+v, want %+v", i, l, w)
		}
	}
	// 1ms, 2ms, 4ms, then the cap: the fourth and the seventh failure wait 4ms
	// plus at most 10% jitter.
	for _, i := range []int{1, 2} {
		if r := lines[i].RetryIn; r < 4 || r > 4.4 {
			t.Errorf("line %d retries in %vms, want the 4ms cap", i, r)
		}
	}
	if calls != len(outcomes)+1 {
		t.Errorf("drain called %d times, want %d", calls, len(outcomes)+1)
	}
}

// A drain cut short by the end of the context is no failure to log.
func TestADrainEndedByItsContextIsNotLogged(t *testing.T) {
	var buf bytes.Buffer
	logger := zerolog.New(&buf)
	ctx, cancel := context.WithCancel(logger.WithContext(context.Background()))
	Loop{Interval: time.Millisecond, Failed: "Drain failed", Recovered: "Drain recovered"}.Run(ctx, func(ctx context.Context) error {
		cancel()
		return ctx.Err()
	})
	if buf.Len() != 0 {
		t.Errorf("logged %s", buf.String())
	}
}
