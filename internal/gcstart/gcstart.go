// Package gcstart holds the garbage collector off while a process starts and
// while a short command runs: until the heap first reaches StartHeap, nothing
// is collected; from the first collection on, the collector paces as GOGC says.
//
// A process of this binary allocates about 10 MiB in package initialisation
// alone (Kubernetes API schemes, JSON schemas, regular expressions of the
// libraries it links), all of it live until the end, and the offline plan
// command a few tens of MiB more. With the default pacing (a 4 MiB minimum heap)
// that is several collections, each marking the whole of that start-up heap, for
// a process that ends a few milliseconds later. A minimum heap of StartHeap
// lets such a process end without one, and costs a command that grows past it
// nothing beyond memory it was about to use anyway.
//
// The package takes effect in its init function, so it must be imported by the
// command's main package (directly or through what it imports); Go initialises
// it before the heavy packages because it imports only the runtime's own and
// sorts before them. A GOGC in the environment is left alone. Long-running
// commands call Restore to pace normally from the start.
package gcstart

import (
	"os"
	"runtime"
	"runtime/debug"
	"sync"
)

// StartHeap is the heap below which nothing is collected until the first
// collection.
const StartHeap = 64 << 20

// defaultMinimumHeap is the Go runtime's minimum heap at GOGC=100: the heap
// target scales with GOGC, so GOGC = 100 * StartHeap / defaultMinimumHeap makes
// StartHeap the target of the first collection.
const defaultMinimumHeap = 4 << 20

var (
	restoreOnce sync.Once
	// restored is closed once the normal pacing is back.
	restored = make(chan struct{})
	// normal is the GOGC the process had before init raised it; zero when init
	// left the collector alone.
	normal int
)

func init() {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	normal = debug.SetGCPercent(100 * StartHeap / defaultMinimumHeap)
	// The first collection, whatever triggers it (the heap reaching StartHeap,
	// a memory limit, runtime.GC), finalises sentinel and brings back the
	// normal pacing: from then on the heap is a multiple of what is live, not
	// of StartHeap.
	sentinel := new(struct{ _ *byte })
	runtime.SetFinalizer(sentinel, func(*struct{ _ *byte }) { Restore() })
}

// Restore returns the collector to the pacing of the process's GOGC at once. It
// is safe to call more than once and from several goroutines.
func Restore() {
	restoreOnce.Do(func() {
		if normal != 0 {
			debug.SetGCPercent(normal)
		}
		close(restored)
	})
}
