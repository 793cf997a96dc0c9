package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/kukie/kukie-gitops/ratelimit"
)

// ErrorBody is the JSON shape of every error answer.
type ErrorBody struct {
	// Error is a stable, machine-readable code such as "invalid_token".
	Error string `json:"error"`
	// Reason says in words what went wrong and, where possible, what to do.
	Reason string `json:"reason"`
}

// WriteError answers with status and {"error": code, "reason": reason}.
func WriteError(w http.ResponseWriter, status int, code, reason string) {
	WriteJSON(w, status, ErrorBody{Error: code, Reason: reason})
}

// CodeRateLimited answers a caller over one of its rate limits (429).
const CodeRateLimited = "rate_limited"

// WriteRateLimited answers a refusal of a rate limit: 429 rate_limited, with
// Retry-After in seconds, so a client can wait exactly as long as needed.
func WriteRateLimited(w http.ResponseWriter, refused *ratelimit.RefusedError) {
	w.Header().Set("Retry-After", strconv.Itoa(refused.RetryAfterSeconds()))
	WriteError(w, http.StatusTooManyRequests, CodeRateLimited, refused.Error())
}

// WriteJSON answers with status and v encoded as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":"internal","reason":"cannot encode the response"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// DecodeJSON reads the request body into v, rejecting unknown fields and trailing
// data. On failure it has already answered (400 or 413) and returns false.
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// What follows the value is read up to the body's limit too: a body past it
		// is too large whatever it holds, not a request with data after its value.
		if _, extra := dec.Token(); extra != io.EOF {
			var tooLarge *http.MaxBytesError
			if errors.As(extra, &tooLarge) {
				err = extra
			} else {
				err = errors.New("unexpected data after the JSON value")
			}
		}
	}
	if err == nil {
		return true
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		WriteError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit))
	case errors.Is(err, io.EOF):
		WriteError(w, http.StatusBadRequest, "invalid_json", "request body is empty; a JSON object is required")
	default:
		WriteError(w, http.StatusBadRequest, "invalid_json", "request body is not valid: "+err.Error())
	}
	return false
}
