package kube

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestBoundedBodyReadsUpToItsBound: an answer of exactly the bound is read whole;
// one byte more fails the read with a *ResponseTooLargeError after the bound's
// bytes, whatever the sizes of the reads.
func TestBoundedBodyReadsUpToItsBound(t *testing.T) {
	for _, size := range []int{9, 10, 11, 100} {
		body := &boundedBody{ReadCloser: io.NopCloser(strings.NewReader(strings.Repeat("x", size))), left: 10,
			tooLarge: &ResponseTooLargeError{Method: "GET", Path: "/api", Limit: 10}}
		got, err := io.ReadAll(io.LimitReader(body, 1000)) // LimitReader: reads of many sizes
		var tooLarge *ResponseTooLargeError
		switch {
		case size <= 10 && (err != nil || len(got) != size):
			t.Errorf("%d bytes under a bound of 10: read %d, %v; want all", size, len(got), err)
		case size > 10 && (!errors.As(err, &tooLarge) || len(got) != 10):
			t.Errorf("%d bytes over a bound of 10: read %d, %v; want 10 and the bound's error", size, len(got), err)
		}
	}
}
