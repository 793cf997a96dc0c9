package server_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/server"
)

// TestServerDropsSlowAndOversizedRequests: a client that never finishes its
// headers (slowloris) or its body has its connection closed once
// server.read_header_timeout or server.read_timeout has passed, an idle keep-alive
// connection once server.idle_timeout has, and headers over 64 KiB are refused 431:
// without them one client holds connections, and their memory, for as long as it
// likes.
func TestServerDropsSlowAndOversizedRequests(t *testing.T) {
	s, _ := newServer(t, server.Config{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 400 * time.Millisecond,
		IdleTimeout: 300 * time.Millisecond}, server.Deps{})
	s.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		_, _ = w.Write(b)
	})
	addr, _, _ := startServer(t, s)

	// closed reads from c until the server closes it; the bound is only there so
	// that a server that never does fails the test rather than hangs it.
	closed := func(t *testing.T, c net.Conn) {
		t.Helper()
		if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		_, err := io.Copy(io.Discard, c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the server kept the connection open")
		}
	}
	dial := func(t *testing.T) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	t.Run("headers never finished", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: kukie\r\nX-Slow: "); err != nil {
			t.Fatal(err)
		}
		closed(t, c)
	})
	t.Run("body never finished", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: kukie\r\nContent-Length: 100\r\n\r\nonly part"); err != nil {
			t.Fatal(err)
		}
		closed(t, c)
	})
	t.Run("idle after an answer", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: kukie\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Close {
			t.Fatalf("first answer %d (close %v), want 200 on a kept connection", res.StatusCode, res.Close)
		}
		closed(t, c)
	})
	t.Run("headers over 64 KiB", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: kukie\r\nX-Big: "+strings.Repeat("x", 80<<10)+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("headers of 80 KiB: %d, want 431", res.StatusCode)
		}
	})
}
