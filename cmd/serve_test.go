package cmd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/service"
	"github.com/kukie/kukie-gitops/store"
)

// runAsBinaryEnv makes the test binary behave as kukie-gitops itself, so tests can
// start the real program (signal handling included) as a child process, with the
// test-only routes below mounted.
const runAsBinaryEnv = "KUKIE_TEST_RUN_AS_BINARY"

// testRenderTimeout bounds the renders of the tests' plans, in the command and in
// the services they start in this process: a render's bound is wall-clock time,
// which a loaded machine (and the race detector) stretches many times past the
// 5 s a service answers people within. The tests of that bound are render's.
const testRenderTimeout = 2 * time.Minute

func TestMain(m *testing.M) {
	if os.Getenv(runAsBinaryEnv) == "1" {
		os.Exit(testProgram.main(os.Args[1:]))
	}
	render.SetTimeout(testRenderTimeout)
	os.Exit(m.Run())
}

// testProgram is the command line with test-only routes: a request whose body
// arrives slowly (to be in flight at SIGTERM), and one that shows which team
// authenticated.
var testProgram = program{extraRoutes: func(svc *service.Service) {
	svc.Handle("POST /test/upload", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zerolog.Ctx(r.Context()).Info().Msg("Test upload started")
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			server.WriteError(w, http.StatusBadRequest, "read_failed", err.Error())
			return
		}
		server.WriteJSON(w, http.StatusOK, map[string]int64{"received": n})
	}))
	svc.Handle("GET /test/whoami", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		team, _ := server.TeamFrom(r.Context())
		server.WriteJSON(w, http.StatusOK, map[string]string{"team": team.Name})
	}), server.TeamAuth(store.ScopeRead))
}}

// run runs the command line as the tests' binary does.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return testProgram.run(ctx, args, stdout, stderr)
}

// logLines collects JSON log lines and lets a test wait for one.
type logLines struct {
	mu    sync.Mutex
	raw   bytes.Buffer
	lines []map[string]any
	added chan struct{}
}

func newLogLines() *logLines { return &logLines{added: make(chan struct{}, 1)} }

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.raw.Write(p)
	sc := bufio.NewScanner(bytes.NewReader(p))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			l.lines = append(l.lines, m)
		}
	}
	select {
	case l.added <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.raw.String()
}

// waitFor returns the first log line with the given message.
func (l *logLines) waitFor(t *testing.T, message string) map[string]any {
	t.Helper()
	return l.waitForUnless(t, message, nil)
}

// waitForUnless is waitFor that gives up as soon as stopped is closed (the program
// ended, so the line will never come).
func (l *logLines) waitForUnless(t *testing.T, message string, stopped <-chan struct{}) map[string]any {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		l.mu.Lock()
		for _, m := range l.lines {
			if m["message"] == message {
				l.mu.Unlock()
				return m
			}
		}
		l.mu.Unlock()
		select {
		case <-l.added:
		case <-time.After(20 * time.Millisecond):
		case <-stopped:
			stopped = nil // look once more: the line may have come just before the end
			time.Sleep(10 * time.Millisecond)
			l.mu.Lock()
			for _, m := range l.lines {
				if m["message"] == message {
					l.mu.Unlock()
					return m
				}
			}
			l.mu.Unlock()
			t.Fatalf("program ended without log line %q; log:\n%s", message, l.String())
		case <-deadline:
			t.Fatalf("no log line %q; log so far:\n%s", message, l.String())
		}
	}
}

func TestServeSIGTERMCompletesInFlightRequestThenExitsZero(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--log-format", "json")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), runAsBinaryEnv+"=1", "KUKIE_DATABASE_URL=sqlite:"+filepath.Join(dir, "k.db"))
	logs := newLogLines()
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	addr := logs.waitFor(t, "Listening")["address"].(string)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers and half the body: the handler starts and waits for the rest.
	if _, err := fmt.Fprint(conn, "POST /test/upload HTTP/1.1\r\nHost: kukie\r\nContent-Length: 10\r\n\r\n12345"); err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, "Test upload started")

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, "Shutting down: draining in-flight requests")
	select {
	case err := <-exited:
		t.Fatalf("process exited (%v) while a request was in flight", err)
	default:
	}

	if _, err := fmt.Fprint(conn, "67890"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("in-flight request got no response: %v\n%s", err, logs)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"received":10`) {
		t.Fatalf("in-flight request: %d %s; want 200 with the whole body read", resp.StatusCode, body)
	}

	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("process exit: %v; want exit code 0\n%s", err, logs)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("process did not exit after draining\n%s", logs)
	}
	logs.waitFor(t, "Stopped")
}

// serveInProcess runs `serve` with args until the returned stop is called.
func serveInProcess(t *testing.T, args ...string) (addr string, logs *logLines, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs = newLogLines()
	code := make(chan int, 1)
	ended := make(chan struct{})
	go func() {
		code <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), io.Discard, logs)
		close(ended)
	}()
	t.Cleanup(cancel)
	addr = logs.waitForUnless(t, "Listening", ended)["address"].(string)
	return addr, logs, func() int { cancel(); return <-code }
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeWithZeroConfiguration(t *testing.T) {
	t.Chdir(t.TempDir())
	addr, logs, stop := serveInProcess(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		if status, body := get(t, "http://"+addr+path, ""); status != 200 {
			t.Fatalf("GET %s = %d %s", path, status, body)
		}
	}
	if status, _ := get(t, "http://"+addr+"/test/whoami", ""); status != 401 {
		t.Fatalf("API without a token = %d, want 401 (no dev auth unless configured)", status)
	}
	if status, body := get(t, "http://"+addr+"/api/v1/notifications/endpoints", ""); status != 401 {
		t.Fatalf("notification endpoints without a token = %d %s, want 401: they are mounted and authenticated", status, body)
	}
	if status, body := get(t, "http://"+addr+"/mcp", ""); status != 401 {
		t.Fatalf("MCP tool server without a token = %d %s, want 401: it is mounted and authenticated", status, body)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit code %d\n%s", code, logs)
	}
	if _, err := os.Stat("kukie.db"); err != nil {
		t.Fatalf("the default SQLite database was not created in the working directory: %v", err)
	}
	line := logs.waitFor(t, "Starting kukie-gitops "+service.Version)
	if line["profile"] != "dev" {
		t.Fatalf("profile %v, want dev", line["profile"])
	}
	// The configuration it logs is the one that applies, durations as they are
	// configured: it said read_timeout 0 (the server then took 30s) and every
	// duration in nanoseconds.
	cfg, _ := line["config"].(map[string]any)
	serverCfg, _ := cfg["server"].(map[string]any)
	pipeline, _ := cfg["pipeline"].(map[string]any)
	for key, want := range map[string]any{"read_header_timeout": "10s", "read_timeout": "30s", "write_timeout": "1m0s",
		"idle_timeout": "2m0s", "shutdown_timeout": "30s", "max_body_bytes": float64(1 << 20)} {
		if serverCfg[key] != want {
			t.Errorf("logged server.%s = %#v, want %#v (the configuration logged: %v)", key, serverCfg[key], want, cfg)
		}
	}
	if pipeline["claim_ttl"] != config.DefaultClaimTTL.String() {
		t.Errorf("logged pipeline.claim_ttl = %#v, want %q", pipeline["claim_ttl"], config.DefaultClaimTTL.String())
	}
}

func TestServeProductionWithEmptyConfigurationRefusesListingEveryProblem(t *testing.T) {
	t.Chdir(t.TempDir())
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"serve", "--profile", "production"}, io.Discard, &stderr)
	if code == 0 {
		t.Fatal("production started with an empty configuration")
	}
	for _, want := range []string{"github.app_id", "github.app_slug", "private key", "webhook secret", "github.client_id", "client secret", "PostgreSQL", "encryption key"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("refusal does not mention %q:\n%s", want, stderr.String())
		}
	}
	if _, err := os.Stat("kukie.db"); err == nil {
		t.Fatal("a refused start still created a database")
	}
}

// TestServeProductionListsUnreadableValuesWithEveryOtherProblem: an unreadable
// secret file and a bad number or duration are reported together with every
// validation problem, so one attempt shows everything to fix.
func TestServeProductionListsUnreadableValuesWithEveryOtherProblem(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("KUKIE_GITHUB_WEBHOOK_SECRET_FILE", filepath.Join(dir, "missing-secret"))
	t.Setenv("KUKIE_GITHUB_APP_ID", "forty-two")
	t.Setenv("KUKIE_PIPELINE_CLAIM_TTL", "a while")
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--profile", "production"}, io.Discard, &stderr); code == 0 {
		t.Fatal("production started with unreadable values")
	}
	for _, want := range []string{"read github webhook secret file", "KUKIE_GITHUB_APP_ID", "KUKIE_PIPELINE_CLAIM_TTL",
		"github.app_slug", "private key", "github.client_id", "PostgreSQL", "encryption key"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("refusal does not mention %q:\n%s", want, stderr.String())
		}
	}
}

func TestServeDevTeamIsLoggedAsInsecure(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("KUKIE_AUTH_DEV_TEAM", "dev")
	addr, logs, stop := serveInProcess(t)
	if status, body := get(t, "http://"+addr+"/test/whoami", ""); status != 200 || !strings.Contains(body, `"team":"dev"`) {
		t.Fatalf("token-less request with dev auth = %d %s", status, body)
	}
	if status, _ := get(t, "http://"+addr+"/test/whoami", "kuk_wrong"); status != 401 {
		t.Fatalf("bad token with dev auth = %d, want 401", status)
	}
	if line := logs.waitFor(t, "INSECURE: dev authentication is on; requests without a token act as this team"); line["level"] != "warn" {
		t.Fatalf("dev auth logged at %v, want warn", line["level"])
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

func TestSecretsNeverReachTheLogs(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	keyFile := filepath.Join(dir, "app.pem")
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	webhookSecret := "whsec-" + base64.RawURLEncoding.EncodeToString(randomBytes(t, 18))
	encryptionKey := base64.StdEncoding.EncodeToString(randomBytes(t, 32))
	cfgFile := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgFile, []byte("github:\n  private_key_file: "+keyFile+"\nlog:\n  level: debug\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUKIE_CONFIG", cfgFile)
	t.Setenv("KUKIE_GITHUB_WEBHOOK_SECRET", webhookSecret)
	t.Setenv("KUKIE_ENCRYPTION_KEY", encryptionKey)

	var allLogs bytes.Buffer
	var out bytes.Buffer
	if code := run(context.Background(), []string{"team", "create", "payments"}, io.Discard, &allLogs); code != 0 {
		t.Fatalf("team create: %d\n%s", code, allLogs.String())
	}
	if code := run(context.Background(), []string{"token", "create", "--team", "payments"}, &out, &allLogs); code != 0 {
		t.Fatalf("token create: %d\n%s", code, allLogs.String())
	}
	token := strings.TrimSpace(out.String())

	addr, logs, stop := serveInProcess(t)
	if status, body := get(t, "http://"+addr+"/test/whoami", token); status != 200 || !strings.Contains(body, "payments") {
		t.Fatalf("request with the token = %d %s", status, body)
	}
	if status, _ := get(t, "http://"+addr+"/test/whoami", token+"x"); status != 401 {
		t.Fatalf("request with a wrong token = %d", status)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	allLogs.WriteString(logs.String())
	text := allLogs.String()
	if !strings.Contains(text, `"team":"payments"`) || !strings.Contains(text, "[redacted]") {
		t.Fatalf("logs lack the request line or the redacted configuration; the test would prove nothing:\n%s", text)
	}
	keyBody := strings.Split(string(keyPEM), "\n")[1] // a line of the key's base64
	for name, s := range map[string]string{
		"api token":      token,
		"token hash":     store.HashAPIToken(secret.New(token)),
		"webhook secret": webhookSecret,
		"encryption key": encryptionKey,
		"private key":    keyBody,
	} {
		if strings.Contains(text, s) {
			t.Errorf("logs contain the %s", name)
		}
	}
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestServeProductionRefusesDevAuthentication: dev authentication in production is
// refused by the configuration's validation before anything starts (serve has no
// check of its own to fall back on).
func TestServeProductionRefusesDevAuthentication(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("KUKIE_AUTH_DEV_TEAM", "dev")
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--profile", "production"}, io.Discard, &stderr); code == 0 {
		t.Fatal("production started with dev authentication")
	}
	if !strings.Contains(stderr.String(), "auth.dev_team must be empty") {
		t.Errorf("refusal does not name auth.dev_team:\n%s", stderr.String())
	}
	if _, err := os.Stat("kukie.db"); err == nil {
		t.Fatal("a refused start still created a database")
	}
}
