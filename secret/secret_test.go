package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

const clear = "ghs_VerySecretInstallationToken123"

func TestSecretNeverPrintsItsValue(t *testing.T) {
	s := New(clear)
	type holder struct {
		Token Secret `json:"token"`
	}
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	log.Info().Stringer("stringer", s).Interface("iface", s).Interface("struct", holder{s}).
		Object("object", s).Msgf("formatted %s %v", s, s)

	jsonOut, err := json.Marshal(holder{s})
	if err != nil {
		t.Fatal(err)
	}
	text, _ := s.MarshalText()
	outputs := map[string]string{
		"%s":      fmt.Sprintf("%s", s),
		"%v":      fmt.Sprintf("%v", s),
		"%+v":     fmt.Sprintf("%+v", holder{s}),
		"%#v":     fmt.Sprintf("%#v", holder{s}),
		"%q":      fmt.Sprintf("%q", s),
		"%x":      fmt.Sprintf("%x", s),
		"%d":      fmt.Sprintf("%d", s),
		"Sprint":  fmt.Sprint(s),
		"Println": fmt.Sprintln(s),
		"json":    string(jsonOut),
		"text":    string(text),
		"zerolog": buf.String(),
	}
	for name, out := range outputs {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(out, clear) || strings.Contains(out, fmt.Sprintf("%x", clear)) {
				t.Fatalf("secret value leaked: %s", out)
			}
			if !strings.Contains(out, Redacted) {
				t.Fatalf("expected %q in %q", Redacted, out)
			}
		})
	}
	if s.Reveal() != clear {
		t.Fatalf("Reveal() = %q", s.Reveal())
	}
}

func TestEmptySecretPrintsNothing(t *testing.T) {
	var s Secret
	if s.IsSet() || fmt.Sprint(s) != "" {
		t.Fatalf("empty secret printed %q", fmt.Sprint(s))
	}
}

func TestUnmarshalText(t *testing.T) {
	var s Secret
	if err := s.UnmarshalText([]byte("abc")); err != nil || s.Reveal() != "abc" {
		t.Fatalf("got %q, %v", s.Reveal(), err)
	}
}
