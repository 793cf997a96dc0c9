package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/metrics"
	"github.com/kukie/kukie-gitops/server"
)

// MetricsPath is where the Prometheus exposition is served, on either listener.
const MetricsPath = "/metrics"

// newRegistry is the registry every part of the service records on (never the
// process-wide default), with the Go runtime and process collectors and the
// build's version.
func newRegistry() (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("register Go runtime metrics: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("register process metrics: %w", err)
	}
	if err := metrics.RegisterBuildInfo(reg, Version); err != nil {
		return nil, err
	}
	return reg, nil
}

// metricsExposition serves the registry at GET /metrics: on the main server when
// address is empty, otherwise on a listener of its own. The route never asks for a
// team token: Prometheus scrapes without one, and where that matters the operator
// binds metrics.address where only it reaches.
type metricsExposition struct {
	handler http.Handler
	address string
}

func newMetricsExposition(ctx context.Context, reg *prometheus.Registry, address string) *metricsExposition {
	return &metricsExposition{address: address, handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            promErrorLog{zerolog.Ctx(ctx)},
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             30 * time.Second,
	})}
}

// listen opens the metrics listener, so a bad address stops the start, and returns
// the function that serves it until its context ends.
func (m *metricsExposition) listen(ctx context.Context) (func(context.Context) error, error) {
	ln, err := net.Listen("tcp", m.address)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w", m.address, err)
	}
	hs := m.server()
	zerolog.Ctx(ctx).Info().Str("address", ln.Addr().String()).Msg("Serving metrics")
	return func(ctx context.Context) error {
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			<-ctx.Done()
			// A scrape is short and repeated; nothing is lost by cutting one off.
			_ = hs.Close()
		}()
		err := hs.Serve(ln)
		<-stopped
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serve metrics: %w", err)
	}, nil
}

// server is the metrics listener's HTTP server, bounded as the main one is:
// whoever reaches the address can open connections and send headers.
func (m *metricsExposition) server() *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, m.handler)
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: server.DefaultReadHeaderTimeout,
		ReadTimeout:       server.DefaultReadTimeout,
		WriteTimeout:      server.DefaultWriteTimeout,
		IdleTimeout:       server.DefaultIdleTimeout,
		MaxHeaderBytes:    server.MaxHeaderBytes,
	}
}

// promErrorLog sends the exposition handler's errors (a collector that failed during a
// scrape) to the service's log.
type promErrorLog struct{ log *zerolog.Logger }

func (l promErrorLog) Println(v ...any) { l.log.Warn().Msg(fmt.Sprint(v...)) }
