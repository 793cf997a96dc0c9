package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	cases := map[string]struct {
		format, level string
		wantErr       bool
		check         func(t *testing.T, out string)
	}{
		"json is one object per line": {format: "json", level: "info", check: func(t *testing.T, out string) {
			var m map[string]any
			if err := json.Unmarshal([]byte(out), &m); err != nil || m["message"] != "Hello" || m["level"] != "info" || m["time"] == nil {
				t.Fatalf("not a JSON log line with message, level, time: %q (%v)", out, err)
			}
		}},
		"console is for people": {format: "console", level: "info", check: func(t *testing.T, out string) {
			if strings.HasPrefix(out, "{") || !strings.Contains(out, "Hello") || !strings.Contains(out, "INF") {
				t.Fatalf("not console output: %q", out)
			}
		}},
		"level filters": {format: "json", level: "warn", check: func(t *testing.T, out string) {
			if out != "" {
				t.Fatalf("info line written at level warn: %q", out)
			}
		}},
		"unknown format": {format: "xml", level: "info", wantErr: true},
		"unknown level":  {format: "json", level: "loud", wantErr: true},
		"empty level":    {format: "json", level: "", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := New(&buf, tc.format, tc.level)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			log.Info().Msg("Hello")
			tc.check(t, buf.String())
		})
	}
}
