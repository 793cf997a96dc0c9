package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Notifications counts attempts at delivering notifications to teams' endpoints.
type Notifications struct {
	attempts *prometheus.CounterVec
}

// NewNotifications registers the notification delivery metrics.
func NewNotifications(reg prometheus.Registerer) (*Notifications, error) {
	m := &Notifications{attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kukie_notification_attempts_total",
		Help: "Attempts at delivering notifications to teams' endpoints, by event (plan.transition, connection.changed) and outcome (delivered, failed).",
	}, []string{"event", "outcome"})}
	if err := reg.Register(m.attempts); err != nil {
		return nil, fmt.Errorf("register notification metrics: %w", err)
	}
	return m, nil
}

// Outcome counts one attempt.
func (m *Notifications) Outcome(event, outcome string) {
	m.attempts.WithLabelValues(event, outcome).Inc()
}
