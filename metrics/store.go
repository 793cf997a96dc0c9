package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// scrapeTimeout bounds the queries of one scrape, so a stuck database turns into a
// failed scrape instead of piling up scrapes.
const scrapeTimeout = 5 * time.Second

// Store is what StoreCollector reads; *store.DB implements it.
type Store interface {
	PlanCountsByStatus(ctx context.Context) (map[string]int64, error)
	WebhookInboxStats(ctx context.Context) (store.InboxStats, error)
}

var (
	plansDesc = prometheus.NewDesc("kukie_plans",
		"Plans by state (every state is reported, zero included).", []string{"state"}, nil)
	inboxDesc = prometheus.NewDesc("kukie_webhook_inbox_deliveries",
		"Webhook deliveries in the inbox by state (pending, processing, done, failed).", []string{"state"}, nil)
	oldestDesc = prometheus.NewDesc("kukie_webhook_inbox_oldest_pending_age_seconds",
		"Age of the oldest webhook delivery waiting for a worker; 0 when none waits.", nil, nil)
)

// inboxStates are reported even when empty, so a backlog query has a series to read.
var inboxStates = []store.DeliveryState{store.DeliveryPending, store.DeliveryProcessing, store.DeliveryDone, store.DeliveryFailed}

// StoreCollector reports the database's plans and webhook inbox at each scrape.
type StoreCollector struct {
	Store Store
	// Now is the clock the oldest pending age is measured with; nil is time.Now.
	Now func() time.Time
}

// Describe implements prometheus.Collector.
func (c StoreCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- plansDesc
	ch <- inboxDesc
	ch <- oldestDesc
}

// Collect implements prometheus.Collector. A query that fails is reported as an
// invalid metric, which fails that part of the scrape visibly instead of reporting
// zeros that look like an empty system.
func (c StoreCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}

	if counts, err := c.Store.PlanCountsByStatus(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(plansDesc, err)
	} else {
		for _, s := range plan.AllStatuses {
			ch <- prometheus.MustNewConstMetric(plansDesc, prometheus.GaugeValue, float64(counts[string(s)]), string(s))
		}
		// A state this version does not know (a newer replica wrote it) is still counted.
		for s, n := range counts {
			if !plan.Status(s).Valid() {
				ch <- prometheus.MustNewConstMetric(plansDesc, prometheus.GaugeValue, float64(n), s)
			}
		}
	}

	st, err := c.Store.WebhookInboxStats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(inboxDesc, err)
		ch <- prometheus.NewInvalidMetric(oldestDesc, err)
		return
	}
	for _, s := range inboxStates {
		ch <- prometheus.MustNewConstMetric(inboxDesc, prometheus.GaugeValue, float64(st.ByState[s]), string(s))
	}
	age := 0.0
	if !st.OldestPending.IsZero() {
		age = max(now().Sub(st.OldestPending).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age)
}
