package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Inbox counts what the webhook inbox's workers did with each attempt; its Outcome
// is the inbox's handler.InboxOptions.Outcome.
type Inbox struct {
	outcomes *prometheus.CounterVec
}

// NewInbox registers the inbox's metrics on reg.
func NewInbox(reg prometheus.Registerer) (*Inbox, error) {
	m := &Inbox{outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kukie_webhook_inbox_outcomes_total",
		Help: "Recorded outcomes of attempts at webhook deliveries, by event type (\"other\" for events no handler takes) and outcome (processed, ignored, skipped, failed, rate_limited, retried).",
	}, []string{"event", "outcome"})}
	if err := reg.Register(m.outcomes); err != nil {
		return nil, fmt.Errorf("register webhook inbox metrics: %w", err)
	}
	return m, nil
}

// Outcome counts one recorded outcome.
func (m *Inbox) Outcome(event, outcome string) { m.outcomes.WithLabelValues(event, outcome).Inc() }
