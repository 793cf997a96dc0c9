package mcp_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/mcp"
	"github.com/kukie/kukie-gitops/secret"
)

// postRPC posts body to the tool server with the token, as a client of protocol
// version 2025-03-26 (which still allowed JSON-RPC batches) does, and returns the
// status and body.
func (e *env) postRPC(t *testing.T, token secret.Secret, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
	res, err := (&http.Client{Transport: bearer{token}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

func batchOf(n int, method string) string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, i+1, method)
	}
	return "[" + strings.Join(calls, ",") + "]"
}

// TestBatchesAreBounded: one HTTP request of a JSON-RPC batch would run every call in
// it and hold all their answers in memory at once (a 1 MiB body holds thousands of
// calls, each answer up to MaxResultChars), past every per-request bound. A batch
// of more than MaxBatch messages is refused, saying so, before any call runs; a
// small one is still answered.
func TestBatchesAreBounded(t *testing.T) {
	e := newEnv(t)
	status, body := e.postRPC(t, e.read, batchOf(mcp.MaxBatch+1, "tools/list"))
	if status != http.StatusBadRequest {
		t.Fatalf("batch of %d = %d (%d bytes), want 400", mcp.MaxBatch+1, status, len(body))
	}
	var rpcErr struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &rpcErr); err != nil || rpcErr.Error.Code != -32600 ||
		!strings.Contains(rpcErr.Error.Message, fmt.Sprintf("at most %d", mcp.MaxBatch)) {
		t.Errorf("refusal = %s (%v), want a JSON-RPC invalid request error naming the limit", body, err)
	}

	status, body = e.postRPC(t, e.read, batchOf(2, "tools/list"))
	var answers []json.RawMessage
	if status != http.StatusOK || json.Unmarshal([]byte(body), &answers) != nil || len(answers) != 2 {
		t.Errorf("batch of 2 = %d (%d answers), want both answered", status, len(answers))
	}
}
