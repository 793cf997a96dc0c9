package kube

import (
	"fmt"
	"io"
	"net/http"
)

// ResponseTooLargeError is an answer of the API server larger than
// Options.MaxResponseBytes, of which no more was read.
type ResponseTooLargeError struct {
	Method, Path string
	Limit        int64
}

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("the API server's answer to %s %s is larger than %d MiB; no more of it is read (is the server URL the cluster's API server?)",
		e.Method, e.Path, e.Limit>>20)
}

// boundedBodies reads at most max bytes of each answer's body, failing the read of
// one larger with a *ResponseTooLargeError. client-go reads an answer whole into
// memory before decoding it, and the server is whatever HTTPS service a team's
// kubeconfig names: one that answers without end would otherwise have the service
// hold all it can send within a call's budget. A watch's stream is not bounded: it
// lasts as long as the watch, and client-go decodes it an event at a time.
type boundedBodies struct {
	next http.RoundTripper
	max  int64
}

func (b boundedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(r)
	if err != nil || resp.Body == nil || r.URL.Query().Get("watch") == "true" {
		return resp, err
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: b.max,
		tooLarge: &ResponseTooLargeError{Method: r.Method, Path: r.URL.Path, Limit: b.max}}
	return resp, nil
}

// boundedBody is a body with left bytes still to be read.
type boundedBody struct {
	io.ReadCloser
	left     int64
	tooLarge error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.left == 0 {
		// At the bound: one more byte tells an answer of exactly the bound from a
		// larger one.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, b.tooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
