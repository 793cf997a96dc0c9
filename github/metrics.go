package github

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gregjones/httpcache"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/prometheus/client_golang/prometheus"
)

// clientMetrics counts requests to GitHub by method, status class and cache hit, and
// tracks the rate limit GitHub reports.
type clientMetrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	remaining *prometheus.GaugeVec
	// The budget's own: content-creating requests left, waits and refusals.
	contentRemaining *prometheus.GaugeVec
	waits            *prometheus.CounterVec
	waitSeconds      *prometheus.CounterVec
	refusals         *prometheus.CounterVec
}

func newClientMetrics(reg prometheus.Registerer) (*clientMetrics, error) {
	m := &clientMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kukie_github_requests_total",
			Help: "Requests made to the GitHub API, by method, status class (2xx…5xx, error) and whether the HTTP cache answered.",
		}, []string{"method", "status", "cached"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kukie_github_request_duration_seconds",
			Help:    "Duration of requests to the GitHub API.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method"}),
		remaining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kukie_github_rate_limit_remaining",
			Help: "Requests left in the current rate limit window, as last reported by GitHub, per installation id (\"app\": the App's own requests, \"user\": people's tokens).",
		}, []string{"installation"}),
		contentRemaining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kukie_github_content_budget_remaining",
			Help: "Content-creating requests (POST, PATCH, PUT, DELETE) the client's budget still allows in its tightest window, per installation id.",
		}, []string{"installation"}),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kukie_github_rate_limit_waits_total",
			Help: "Requests the client held back to stay within GitHub's rate limits, per installation id and limit (content, secondary, primary).",
		}, []string{"installation", "limit"}),
		waitSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kukie_github_rate_limit_wait_seconds_total",
			Help: "Time requests spent held back for GitHub's rate limits, per installation id and limit.",
		}, []string{"installation", "limit"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kukie_github_rate_limit_deferred_total",
			Help: "Requests not sent because the wait for GitHub's rate limit was longer than a request may be held; their callers wait and try again.",
		}, []string{"installation", "limit"}),
	}
	if reg == nil {
		return m, nil
	}
	// A second creator in one process (tests, a restart of the wiring) shares the
	// collectors registered first.
	var err error
	if m.requests, err = register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, m.duration); err != nil {
		return nil, err
	}
	if m.remaining, err = register(reg, m.remaining); err != nil {
		return nil, err
	}
	if m.contentRemaining, err = register(reg, m.contentRemaining); err != nil {
		return nil, err
	}
	if m.waits, err = register(reg, m.waits); err != nil {
		return nil, err
	}
	if m.waitSeconds, err = register(reg, m.waitSeconds); err != nil {
		return nil, err
	}
	if m.refusals, err = register(reg, m.refusals); err != nil {
		return nil, err
	}
	return m, nil
}

// middleware counts the requests of clients of one rate limit: an installation's
// id, "app" or "user". Each installation has a limit of its own, so one gauge for
// all would jump between them.
func (m *clientMetrics) middleware(installation string) githubapp.ClientMiddleware {
	return func(next http.RoundTripper) http.RoundTripper {
		return m.count(installation, next)
	}
}

// count measures the requests through next. The rate-limit series of installation
// appears with GitHub's first report, never as a 0 nobody reported.
func (m *clientMetrics) count(installation string, next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		start := time.Now()
		res, err := next.RoundTrip(r)
		m.duration.WithLabelValues(r.Method).Observe(time.Since(start).Seconds())
		status, cached := "error", "false"
		if res != nil {
			status = strconv.Itoa(res.StatusCode/100) + "xx"
			if res.Header.Get(httpcache.XFromCache) != "" {
				cached = "true"
			}
			if v, perr := strconv.ParseFloat(res.Header.Get("X-RateLimit-Remaining"), 64); perr == nil {
				m.remaining.WithLabelValues(installation).Set(v)
			}
		}
		m.requests.WithLabelValues(r.Method, status, cached).Inc()
		return res, err
	})
}

func (m *clientMetrics) waited(installation, limit string, d time.Duration) {
	m.waits.WithLabelValues(installation, limit).Inc()
	m.waitSeconds.WithLabelValues(installation, limit).Add(d.Seconds())
}

func (m *clientMetrics) refused(installation, limit string) {
	m.refusals.WithLabelValues(installation, limit).Inc()
}

func (m *clientMetrics) contentLeft(installation string, n int) {
	m.contentRemaining.WithLabelValues(installation).Set(float64(n))
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("register GitHub client metrics: %w", err)
	}
	return c, nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
