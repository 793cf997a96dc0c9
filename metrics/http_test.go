package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kukie/kukie-gitops/metrics"
)

func TestHTTPCountsRequestsByRouteAndStatusClass(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.NewHTTP(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Request("POST /api/v1/changes", 201, 40*time.Millisecond)
	m.Request("POST /api/v1/changes", 422, 30*time.Millisecond)
	m.Request("POST /api/v1/changes", 401, time.Millisecond)
	m.Request("unmatched", 404, time.Millisecond)
	want := `
# HELP kukie_http_requests_total Requests the service answered, by route (its pattern, as "POST /api/v1/changes"; "unmatched" for a path no route serves) and status class (2xx, 3xx, 4xx, 5xx).
# TYPE kukie_http_requests_total counter
kukie_http_requests_total{route="POST /api/v1/changes",status="2xx"} 1
kukie_http_requests_total{route="POST /api/v1/changes",status="4xx"} 2
kukie_http_requests_total{route="unmatched",status="4xx"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kukie_http_requests_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "kukie_http_request_duration_seconds"); n != 2 {
		t.Fatalf("%d duration series, want one per route", n)
	}
}
