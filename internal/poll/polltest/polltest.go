// Package polltest runs a worker built on poll.Loop through an outage of its store,
// for the tests of each such worker.
package polltest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// Outage is a drain that fails Failures times, then works once, then ends the
// context its worker runs in.
type Outage struct {
	failures, calls int
	log             bytes.Buffer
	cancel          context.CancelFunc
}

// Start returns an outage of failures drains and the context to run the worker in,
// whose logger writes into the outage.
func Start(t *testing.T, failures int) (*Outage, context.Context) {
	o := &Outage{failures: failures}
	logger := zerolog.New(&o.log)
	ctx, cancel := context.WithCancel(logger.WithContext(context.Background()))
	t.Cleanup(cancel)
	o.cancel = cancel
	return o, ctx
}

// Drain is the worker's drain through the outage.
func (o *Outage) Drain(context.Context) (int, error) {
	o.calls++
	switch {
	case o.calls <= o.failures:
		return 0, errors.New("connection refused")
	case o.calls == o.failures+1:
		return 0, nil
	}
	o.cancel()
	return 0, context.Canceled
}

// Logged returns each line the worker logged as "level: message".
func (o *Outage) Logged(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, raw := range strings.Split(strings.TrimSpace(o.log.String()), "\n") {
		var line struct{ Level, Message string }
		if err := json.Unmarshal([]byte(raw), &line); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		out = append(out, line.Level+": "+line.Message)
	}
	return out
}
