package service

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// TestMetricsListenerBoundsHeaders: the metrics listener of its own
// (metrics.address) refuses headers over 64 KiB with 431, as the main listener
// does, and still serves a scrape: it used Go's default of 1 MiB a request.
func TestMetricsListenerBoundsHeaders(t *testing.T) {
	reg := prometheus.NewRegistry()
	up := prometheus.NewGauge(prometheus.GaugeOpts{Name: "kukie_test_up", Help: "Always 1."})
	up.Set(1)
	reg.MustRegister(up)
	ctx := zerolog.Nop().WithContext(context.Background())
	m := newMetricsExposition(ctx, reg, "127.0.0.1:0")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := m.server()
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	url := "http://" + ln.Addr().String() + MetricsPath

	get := func(header string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if header != "" {
			req.Header.Set("X-Padding", header)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", MetricsPath, err)
		}
		defer res.Body.Close()
		return res.StatusCode
	}
	if code := get(""); code != http.StatusOK {
		t.Fatalf("a scrape: %d, want 200", code)
	}
	if code := get(strings.Repeat("a", 80<<10)); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("headers of 80 KiB: %d, want 431", code)
	}
}
