package githubtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// conditionalWriter gives successful JSON answers to GET requests an ETag, as GitHub
// does, and answers 304 Not Modified without a body when the request's
// If-None-Match names it. Other answers (archives, git over HTTP, errors) pass
// through untouched.
type conditionalWriter struct {
	http.ResponseWriter
	ifNoneMatch string
	// buffering is set once a 200 JSON answer started; its body is held until finish.
	buffering   bool
	wroteHeader bool
	body        bytes.Buffer
	// notModified counts the 304s the fake answered.
	notModified func()
}

func (w *conditionalWriter) WriteHeader(status int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	if status == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		w.buffering = true
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *conditionalWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.buffering {
		return w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes through for streamed answers (git over HTTP).
func (w *conditionalWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.buffering {
		f.Flush()
	}
}

// finish sends a held answer: the full body, or 304 when the client has it already.
func (w *conditionalWriter) finish() {
	if !w.buffering {
		return
	}
	sum := sha256.Sum256(w.body.Bytes())
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	h := w.Header()
	h.Set("ETag", etag)
	// GitHub's own caching headers; the service's client rewrites max-age to 0 so
	// it always revalidates.
	h.Set("Cache-Control", "private, max-age=60, s-maxage=60")
	h.Add("Vary", "Accept, Authorization")
	if etagMatches(w.ifNoneMatch, etag) {
		h.Del("Content-Type")
		h.Del("Content-Length")
		w.ResponseWriter.WriteHeader(http.StatusNotModified)
		if w.notModified != nil {
			w.notModified()
		}
		return
	}
	w.ResponseWriter.WriteHeader(http.StatusOK)
	_, _ = w.ResponseWriter.Write(w.body.Bytes())
}

// etagMatches reports whether an If-None-Match header names etag (weak or strong).
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == "*" || v == etag {
			return true
		}
	}
	return false
}

// NotModifiedCount returns how many GET requests the fake answered with 304 Not
// Modified because the client's If-None-Match named the current ETag.
func (s *Server) NotModifiedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notModified
}
