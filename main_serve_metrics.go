package main

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

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/server"
)

// metricsPath is where the Prometheus exposition is served, on either listener.
const metricsPath = "/metrics"

// mountMetrics builds the registry every component records on and serves it at
// GET /metrics: on the main server when metrics.address is empty, otherwise on a
// listener of its own, opened here so a bad address stops the start. The returned
// function (nil on the main server) serves that listener until its context ends;
// release closes the listener if that function never runs (a later step of the
// start failed) and does nothing otherwise.
// The route never asks for a team token: Prometheus scrapes without one, and where
// that matters the operator binds metrics.address where only it reaches.
func mountMetrics(ctx context.Context, cfg config.Config, srv *server.Server) (reg *prometheus.Registry, serveApart func(context.Context) error, release func(), err error) {
	reg = prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, nil, nil, fmt.Errorf("register Go runtime metrics: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, nil, nil, fmt.Errorf("register process metrics: %w", err)
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            promErrorLog{zerolog.Ctx(ctx)},
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             30 * time.Second,
	})
	if cfg.Metrics.Address == "" {
		srv.Handle("GET "+metricsPath, h)
		return reg, nil, func() {}, nil
	}
	ln, err := net.Listen("tcp", cfg.Metrics.Address)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listen for metrics on %s: %w", cfg.Metrics.Address, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+metricsPath, h)
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: server.DefaultReadHeaderTimeout,
		ReadTimeout:       server.DefaultReadTimeout,
		WriteTimeout:      server.DefaultWriteTimeout,
		IdleTimeout:       server.DefaultIdleTimeout,
	}
	zerolog.Ctx(ctx).Info().Str("address", ln.Addr().String()).Msg("Serving metrics")
	return reg, func(ctx context.Context) error {
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
	}, func() { _ = ln.Close() }, nil
}

// promErrorLog sends the exposition handler's errors (a collector that failed during a
// scrape) to the service's log.
type promErrorLog struct{ log *zerolog.Logger }

func (l promErrorLog) Println(v ...any) { l.log.Warn().Msg(fmt.Sprint(v...)) }
