// Package secret owns the Secret string type: a value (token, private key, webhook
// secret) that must never reach a log line, an API answer, a PR or a check run. Every
// way of printing it yields "[redacted]"; only Reveal returns the value, so each use of
// the clear text is visible in code review.
package secret

import (
	"fmt"

	"github.com/rs/zerolog"
)

// Redacted is what every printed form of a Secret shows.
const Redacted = "[redacted]"

// Secret holds sensitive text. The zero value is the empty secret.
type Secret string

// New wraps a clear-text value.
func New(v string) Secret { return Secret(v) }

// Reveal returns the clear text. Call it only where the value is handed to the party
// that needs it (an HTTP header, a signature, a cipher), never to build output.
func (s Secret) Reveal() string { return string(s) }

// IsSet reports whether the secret has a value.
func (s Secret) IsSet() bool { return s != "" }

// String implements fmt.Stringer.
func (s Secret) String() string { return s.mask() }

// GoString implements fmt.GoStringer so %#v does not print the value either.
func (s Secret) GoString() string { return fmt.Sprintf("secret.Secret(%q)", s.mask()) }

// Format makes every verb (%s, %v, %q, %x, %d …) print the mask.
func (s Secret) Format(f fmt.State, verb rune) {
	switch verb {
	case 'q':
		fmt.Fprintf(f, "%q", s.mask())
	default:
		fmt.Fprint(f, s.mask())
	}
}

// MarshalJSON keeps values out of API answers and stored payloads.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.mask() + `"`), nil }

// MarshalText covers encoders that use encoding.TextMarshaler (YAML, zerolog maps).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.mask()), nil }

// UnmarshalText lets configuration decoders fill a Secret from text.
func (s *Secret) UnmarshalText(b []byte) error { *s = Secret(b); return nil }

// MarshalZerologObject is used by zerolog's Object/EmbedObject.
func (s Secret) MarshalZerologObject(e *zerolog.Event) { e.Str("value", s.mask()) }

func (s Secret) mask() string {
	if s == "" {
		return ""
	}
	return Redacted
}
