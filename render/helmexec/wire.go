package helmexec

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// The dynamic types of values and of a chart's import-values: what YAML, JSON
// and --set parsing make. gob keeps int64 and float64 apart where JSON would
// not, so a value renders in the worker as it would in process.
func registerValueTypes() {
	gob.Register(map[string]any{})
	gob.Register([]any{})
	gob.Register(json.Number(""))
	gob.Register(int(0))
	gob.Register(int64(0))
	gob.Register(float64(0))
	gob.Register(time.Time{})
}

// request is one job for a worker: a Helm render, or a kustomize build when
// Kustomize is set.
type request struct {
	Chart     wireChart
	Values    map[string]any
	Options   Options
	Kustomize *kustomizeRequest
	// Deadline, when set, is when the worker ends itself should its parent be
	// gone and not kill it.
	Deadline time.Time
}

// response is a worker's answer: the output of "helm template" or the
// resources of a kustomize build, or why there is none. A response with Call
// is no answer yet: the worker asks its parent for a file system call of a
// build and waits for the fsReply.
type response struct {
	Manifest  string
	Resources []map[string]any
	Call      *fsCall
	// Printed is what a kustomize build printed (its warnings).
	Printed string
	// Err is the tool's error for its input (Helm's for the chart, kustomize's
	// for the kustomization), Panic a panic of the tool's.
	Err      string
	Panic    string
	TooLarge bool
	// Forwarded counts the file system calls of a kustomize build its parent
	// made, Answered those the request had answered; ReadAnswered are the
	// files the build read from the request, by the index of their answers.
	Forwarded, Answered int
	ReadAnswered        []int
}

// wireChart is a chart with its dependencies as exported fields, which gob can
// carry (a chart keeps them unexported). Raw is left out: "helm template" does
// not read it.
type wireChart struct {
	Metadata      *chart.Metadata
	Lock          *chart.Lock
	Templates     []*common.File
	Values        map[string]any
	Schema        []byte
	SchemaModTime time.Time
	Files         []*common.File
	ModTime       time.Time
	Dependencies  []wireChart
}

func toWire(ch *chart.Chart) wireChart {
	w := wireChart{
		Metadata: ch.Metadata, Lock: ch.Lock, Templates: ch.Templates, Values: ch.Values,
		Schema: ch.Schema, SchemaModTime: ch.SchemaModTime, Files: ch.Files, ModTime: ch.ModTime,
	}
	for _, d := range ch.Dependencies() {
		w.Dependencies = append(w.Dependencies, toWire(d))
	}
	return w
}

func fromWire(w wireChart) *chart.Chart {
	ch := &chart.Chart{
		Metadata: w.Metadata, Lock: w.Lock, Templates: w.Templates, Values: w.Values,
		Schema: w.Schema, SchemaModTime: w.SchemaModTime, Files: w.Files, ModTime: w.ModTime,
	}
	for _, d := range w.Dependencies {
		ch.AddDependency(fromWire(d))
	}
	return ch
}

// A frame is a 4-byte big-endian length and that many bytes of one gob value.
const frameHeader = 4

func encodeFrame(v any) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write(make([]byte, frameHeader))
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if len(b)-frameHeader > 1<<31 {
		return nil, fmt.Errorf("a frame of %d bytes is too large", len(b)-frameHeader)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-frameHeader))
	return b, nil
}

// readFrame reads one frame of at most limit bytes into v. A longer frame is an
// error before any of it is read.
func readFrame(r io.Reader, limit int64, v any) error {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return err
	}
	n := int64(binary.BigEndian.Uint32(h[:]))
	if n > limit {
		return fmt.Errorf("a frame of %d bytes is more than the %d allowed", n, limit)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return fmt.Errorf("read a frame of %d bytes: %w", n, err)
	}
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(v); err != nil {
		return fmt.Errorf("decode a frame: %w", err)
	}
	return nil
}
