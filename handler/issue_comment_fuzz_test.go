package handler

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzCommandOf reads any comment anyone who can comment on a pull request
// writes: a command is found only where the comment starts with it whole, and
// its words are what follows it on its own line, trimmed, never a line below.
func FuzzCommandOf(f *testing.F) {
	for _, seed := range []string{
		CommandCancel, CommandCancel + " wrong cluster", CommandCancel + " not now\r\nthanks, Ann",
		CommandCancel + " a\rb", CommandCancel + "led", CommandCancel + "?", "  " + CommandRerender + "\n",
		CommandRerender + "\u00a0please", "> " + CommandCancel, "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		command, words, ok := commandOf(body)
		if !ok {
			if command != "" || words != "" {
				t.Fatalf("no command, but %q %q", command, words)
			}
			return
		}
		if command != CommandCancel && command != CommandRerender {
			t.Fatalf("command %q", command)
		}
		rest, found := strings.CutPrefix(strings.TrimSpace(body), command)
		if next, _ := utf8.DecodeRuneInString(rest); !found || (rest != "" && !unicode.IsSpace(next)) {
			t.Fatalf("%q read as the command %q", body, command)
		}
		if strings.ContainsAny(words, "\r\n") || words != strings.TrimSpace(words) || !strings.Contains(rest, words) {
			t.Fatalf("words %q of %q are not the rest of the command's line, trimmed", words, body)
		}
	})
}
