// Package textcut shortens text from elsewhere (errors quoting a payload, a
// caller's parameters) before it is stored, logged or answered, so its size is
// the service's choice and not the sender's.
package textcut

import "unicode/utf8"

// Ellipsis marks where text was cut.
const Ellipsis = "…"

// Cut returns s when it is at most n bytes, and otherwise its first n bytes or
// fewer, ending at a whole character, followed by Ellipsis (3 bytes more): a cut
// inside a character would leave bytes that are no UTF-8, which PostgreSQL refuses
// to store and JSON encoders replace.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + Ellipsis
}
