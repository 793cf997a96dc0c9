package githubtest

import (
	"bytes"
	"io"
	"net/http"
)

// RecordedRequest is one request the server received, with its body as sent.
type RecordedRequest struct {
	Method string
	// Path is the request path without the /api/v3 prefix.
	Path string
	Body []byte
}

// RecordRequests makes the server keep every request it receives from now on,
// body included, until the test ends: a test can then check everything the service
// sent GitHub (for example that no secret value left it).
func (s *Server) RecordRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recording = true
}

// Requests returns a copy of the requests recorded so far, in arrival order.
func (s *Server) Requests() []RecordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RecordedRequest(nil), s.recorded...)
}

// record keeps r when recording, leaving its body readable for the handler.
func (s *Server) record(r *http.Request) {
	s.mu.Lock()
	on := s.recording
	s.mu.Unlock()
	if !on {
		return
	}
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.mu.Lock()
	s.recorded = append(s.recorded, RecordedRequest{Method: r.Method, Path: r.URL.Path, Body: body})
	s.mu.Unlock()
}
