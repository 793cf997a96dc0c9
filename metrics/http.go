package metrics

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kukie/kukie-gitops/server"
)

// HTTP records the requests the service's HTTP server answered; it is the
// server's server.RequestObserver. Its labels are the route table's patterns
// (and "unmatched") and status classes: fixed sets.
type HTTP struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewHTTP registers the HTTP server's metrics on reg.
func NewHTTP(reg prometheus.Registerer) (*HTTP, error) {
	m := &HTTP{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kukie_http_requests_total",
			Help: `Requests the service answered, by route (its pattern, as "POST /api/v1/changes"; "unmatched" for a path no route serves) and status class (2xx, 3xx, 4xx, 5xx).`,
		}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kukie_http_request_duration_seconds",
			Help: "Time the service took to answer a request, by route.",
			// From a health probe (a millisecond) to a change that renders before it
			// answers (seconds).
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 10),
		}, []string{"route"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register HTTP metrics: %w", err)
		}
	}
	return m, nil
}

// Request implements server.RequestObserver.
func (m *HTTP) Request(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status/100)+"xx").Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}

var _ server.RequestObserver = (*HTTP)(nil)
