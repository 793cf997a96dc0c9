// Package logging owns how the process's zerolog logger is built: JSON lines by
// default (for log collectors), a human console format for local runs, and the
// level. Code below main never builds a logger; it takes the one in its context
// (zerolog.Ctx).
package logging

import (
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"
)

// Formats accepted by New.
const (
	FormatJSON    = "json"
	FormatConsole = "console"
)

// New returns a logger writing to w in format ("json" or "console") at level
// ("trace" … "error").
func New(w io.Writer, format, level string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Nop(), fmt.Errorf("log level %q: want trace, debug, info, warn or error", level)
	}
	switch format {
	case FormatJSON, "":
	case FormatConsole:
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	default:
		return zerolog.Nop(), fmt.Errorf("log format %q: want %s or %s", format, FormatJSON, FormatConsole)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}
