package githubtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-github/v62/github"
)

// receivedEvent is one webhook the test receiver accepted.
type receivedEvent struct {
	event    string
	delivery string
	payload  any
}

// receiver is a webhook endpoint that checks signatures the way the service must
// (go-github's ValidatePayload) and parses every payload with go-github.
type receiver struct {
	mu     sync.Mutex
	events []receivedEvent
	status int
}

func newReceiver(t *testing.T, s *Server) *receiver {
	t.Helper()
	rc := &receiver{status: http.StatusAccepted}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := github.ValidatePayload(r, []byte(s.WebhookSecret().Reveal()))
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		ev, err := github.ParseWebHook(github.WebHookType(r), body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.events = append(rc.events, receivedEvent{event: github.WebHookType(r), delivery: github.DeliveryID(r), payload: ev})
		w.WriteHeader(rc.status)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	s.SetWebhookURL(srv.URL)
	return rc
}

func (rc *receiver) received() []receivedEvent {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedEvent(nil), rc.events...)
}

func (rc *receiver) of(event string) []any {
	var out []any
	for _, e := range rc.received() {
		if e.event == event {
			out = append(out, e.payload)
		}
	}
	return out
}
