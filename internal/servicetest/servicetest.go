// Package servicetest holds the small pieces that tests running the service's HTTP
// server share: a log sink safe to read while the server writes to it, and a JSON
// request helper.
package servicetest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/kukie/kukie-gitops/secret"
)

// SyncBuffer collects log output written from many goroutines.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Do sends a request to srv with body encoded as JSON (none when nil) and the bearer
// token (none when unset), and returns the answer's status and body. Any failure
// to send or read fails the test.
func Do(t testing.TB, srv *httptest.Server, method, path string, token secret.Secret, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token.IsSet() {
		req.Header.Set("Authorization", "Bearer "+token.Reveal())
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, out
}
