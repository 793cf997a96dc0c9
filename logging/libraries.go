package logging

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"os"
	"strings"
	"sync"

	"github.com/rs/zerolog"
)

// maxLibraryLine bounds one captured line; the rest of a longer line is dropped.
const maxLibraryLine = 16 << 10

// kustomizeWarning starts the deprecation warnings kustomize prints for every
// build of a kustomization with deprecated fields (commonLabels, bases,
// patchesStrategicMerge, …).
const kustomizeWarning = "# Warning: "

// LibraryOutput turns what libraries print outside any logger into log entries:
// kustomize writes its deprecation warnings straight to os.Stderr, and some
// libraries use the standard log package. Printed raw, such text lands between
// the service's JSON lines, where log collectors cannot parse it. Each captured
// line becomes one warn entry with a "component" key (kustomize, log or stderr).
//
// Only the os.Stderr variable is replaced, never file descriptor 2: a crash
// (the Go runtime writes to the descriptor) still reaches the real stderr.
type LibraryOutput struct {
	mu  sync.Mutex
	log zerolog.Logger

	stderr   *os.File
	logOut   io.Writer
	logFlags int
	r, w     *os.File
	done     chan struct{}
}

// CaptureLibraryOutput starts capturing, logging through log until Use names
// another logger. Call it once, at the start of the process and before any other
// goroutine runs, and Close it at the end.
func CaptureLibraryOutput(log zerolog.Logger) (*LibraryOutput, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("capture library output: %w", err)
	}
	o := &LibraryOutput{log: log, stderr: os.Stderr, logOut: stdlog.Writer(), logFlags: stdlog.Flags(), r: r, w: w, done: make(chan struct{})}
	os.Stderr = w
	stdlog.SetOutput(stdlogWriter{o})
	// Every entry gets zerolog's own timestamp.
	stdlog.SetFlags(0)
	stdlog.SetPrefix("")
	go o.read()
	return o, nil
}

// Use makes log the logger of every line captured from now on. It does nothing on
// a nil LibraryOutput, so code that may run without a capture can call it.
func (o *LibraryOutput) Use(log zerolog.Logger) {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.log = log
	o.mu.Unlock()
}

// Close restores os.Stderr and the standard logger and returns once every line
// written before it is logged.
func (o *LibraryOutput) Close() error {
	if o == nil {
		return nil
	}
	stdlog.SetOutput(o.logOut)
	stdlog.SetFlags(o.logFlags)
	err := o.w.Close()
	<-o.done
	// Only once the reader is done: loggers read os.Stderr as they write (zerolog's
	// console writer does).
	os.Stderr = o.stderr
	return errors.Join(err, o.r.Close())
}

func (o *LibraryOutput) read() {
	defer close(o.done)
	br := bufio.NewReaderSize(o.r, maxLibraryLine)
	for {
		line, err := br.ReadSlice('\n')
		o.entry("stderr", string(line), errors.Is(err, bufio.ErrBufferFull))
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = br.ReadSlice('\n')
		}
		if err != nil {
			return
		}
	}
}

func (o *LibraryOutput) entry(component, line string, truncated bool) {
	line = strings.TrimSpace(line)
	if line == "" {
		return
	}
	if rest, ok := strings.CutPrefix(line, kustomizeWarning); ok {
		component, line = "kustomize", rest
	}
	o.mu.Lock()
	log := o.log
	o.mu.Unlock()
	ev := log.Warn().Str("component", component)
	if truncated {
		ev = ev.Bool("truncated", true)
	}
	ev.Msg(line)
}

// stdlogWriter receives the standard logger's entries, one Write each.
type stdlogWriter struct{ o *LibraryOutput }

func (w stdlogWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(string(p), "\n") {
		if len(line) > maxLibraryLine {
			w.o.entry("log", line[:maxLibraryLine], true)
			continue
		}
		w.o.entry("log", line, false)
	}
	return len(p), nil
}

type libraryOutputKey struct{}

// WithLibraryOutput returns a context carrying o, for the commands to hand it
// their logger (see LibraryOutputFrom).
func WithLibraryOutput(ctx context.Context, o *LibraryOutput) context.Context {
	return context.WithValue(ctx, libraryOutputKey{}, o)
}

// LibraryOutputFrom returns the capture the context carries, or nil (on which Use
// does nothing).
func LibraryOutputFrom(ctx context.Context) *LibraryOutput {
	o, _ := ctx.Value(libraryOutputKey{}).(*LibraryOutput)
	return o
}
