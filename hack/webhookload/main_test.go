package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"
)

func TestRequireLoopback(t *testing.T) {
	cases := map[string]struct {
		target string
		ok     bool
	}{
		"ipv4 loopback": {target: "http://127.0.0.1:8080/webhooks/github", ok: true},
		"ipv6 loopback": {target: "http://[::1]:8080/webhooks/github", ok: true},
		"localhost":     {target: "http://localhost:8080/webhooks/github", ok: true},
		"private net":   {target: "http://10.0.0.5:8080/webhooks/github"},
		"public host":   {target: "https://example.com/webhooks/github"},
		"lookalike":     {target: "http://127.0.0.1.example.com/"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := requireLoopback(tc.target); (err == nil) != tc.ok {
				t.Errorf("requireLoopback(%q) = %v, want ok=%v", tc.target, err, tc.ok)
			}
		})
	}
}

func TestRunBoundsAndReports(t *testing.T) {
	for name, o := range map[string]options{
		"too many":      {count: maxCount + 1, duration: time.Second, concurrency: 1},
		"too long":      {count: 1, duration: maxDuration + time.Second, concurrency: 1},
		"no senders":    {count: 1, duration: time.Second, concurrency: 0},
		"remote target": {count: 1, duration: time.Second, concurrency: 1, target: "http://192.0.2.1/webhooks/github"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := run(context.Background(), o, &bytes.Buffer{}); err == nil {
				t.Error("run accepted out-of-bounds options")
			}
		})
	}

	var out bytes.Buffer
	if err := run(context.Background(), options{count: 40, duration: time.Minute, concurrency: 4, payloadBytes: 512, workers: 2}, &out); err != nil {
		t.Fatal(err)
	}
	accepted := regexp.MustCompile(`(\d+) accepted, 0 failed`).FindStringSubmatch(out.String())
	drained := regexp.MustCompile(`drain: (\d+) deliveries`).FindStringSubmatch(out.String())
	if accepted == nil || drained == nil || accepted[1] != "40" || drained[1] != strconv.Itoa(40) {
		t.Errorf("report does not show 40 accepted and 40 drained:\n%s", out.String())
	}
}
