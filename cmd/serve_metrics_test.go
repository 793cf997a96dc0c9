package cmd

import (
	"runtime"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/service"
)

func TestServeExposesMetricsWithoutAToken(t *testing.T) {
	t.Chdir(t.TempDir())
	addr, logs, stop := serveInProcess(t)
	if status, _ := get(t, "http://"+addr+"/healthz", ""); status != 200 {
		t.Fatalf("GET /healthz = %d", status)
	}
	status, body := get(t, "http://"+addr+"/metrics", "")
	if status != 200 {
		t.Fatalf("GET /metrics without a token = %d %s, want 200", status, body)
	}
	for _, name := range []string{"go_goroutines", "process_start_time_seconds", `kukie_build_info{goversion="` + runtime.Version() + `",version="` + service.Version + `"}`, `kukie_plans{state="pr_open"}`, `kukie_webhook_inbox_deliveries{state="pending"}`, "kukie_webhook_inbox_oldest_pending_age_seconds",
		// The Helm workers of the process, before any render.
		"kukie_helm_workers_max", `kukie_helm_workers{state="idle"}`, "kukie_helm_worker_starts_total", `kukie_helm_worker_exits_total{cause="memory_limit"}`,
		`kukie_helm_renders_total{outcome="deadline"}`, "kukie_helm_render_duration_seconds_count",
		// The requests answered, by route.
		`kukie_http_requests_total{route="GET /healthz",status="2xx"}`, `kukie_http_request_duration_seconds_count{route="GET /healthz"}`} {
		if !strings.Contains(body, "\n"+name+" ") {
			t.Errorf("/metrics lacks %s:\n%s", name, body)
		}
	}
	if status, _ := get(t, "http://"+addr+"/test/whoami", ""); status != 401 {
		t.Fatalf("API without a token = %d, want 401: /metrics must not open the API", status)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit code %d\n%s", code, logs)
	}
}

func TestServeMetricsOnTheirOwnListener(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("KUKIE_METRICS_ADDRESS", "127.0.0.1:0")
	addr, logs, stop := serveInProcess(t)
	metricsAddr := logs.waitFor(t, "Serving metrics")["address"].(string)
	if metricsAddr == addr {
		t.Fatalf("metrics listen on the main address %s", addr)
	}
	if status, body := get(t, "http://"+metricsAddr+"/metrics", ""); status != 200 || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("GET /metrics on the metrics listener = %d %s", status, body)
	}
	if status, _ := get(t, "http://"+addr+"/metrics", ""); status != 404 {
		t.Fatalf("GET /metrics on the main listener = %d, want 404 once metrics.address is set", status)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit code %d\n%s", code, logs)
	}
}
