package render

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gopkg.in/yaml.v3"
)

// Bounds on what one plan reads. Repository content is untrusted: a few hundred
// bytes of YAML aliases expand to gigabytes, and kustomize's cost grows with the
// square of the resources it holds. Every file a render hands to a decoder or to
// kustomize (manifests, resources, patches, bases, components, kustomization files
// themselves, new files of an edit) is read through one bounded reader, view.read
// and tree.readFile, which checks it against these limits before any decoder sees
// it; each is far above what a real repository holds. A plan that would exceed one
// is refused with a reason naming the file and the limit.
const (
	// MaxFileSize is the largest file render reads.
	MaxFileSize = 5 << 20
	// MaxDepth is the deepest nesting of collections in one YAML document,
	// aliases expanded.
	MaxDepth = 256
	// MaxMappingKeys is how many keys one YAML mapping may hold: kustomize's
	// YAML library sets a mapping's keys one by one, each looked up among the
	// keys before it.
	MaxMappingKeys = 5_000
	// MaxAliasNodes is how many nodes alias expansion may add to one YAML
	// document: real manifests reuse a few small anchors, a billion-laughs
	// document needs far more. It is the bound the YAML editor applies too.
	MaxAliasNodes = 10_000
	// MaxRenderDocuments is how many YAML documents one render may read, counted
	// over every file it reads, as often as it reads it. Kustomize checks each
	// new resource against all it holds, so its time grows with the square of
	// this number.
	MaxRenderDocuments = 1_000
	// MaxRenderNodes is how many YAML nodes (scalars and collections, aliases
	// expanded) one render may read: a decoder's memory grows with it.
	MaxRenderNodes = 250_000
	// MaxRenderBytes is how many bytes one render may read, counted like
	// MaxRenderDocuments.
	MaxRenderBytes = 16 << 20
	// MaxPlanBytes is how many bytes one plan may read from the repository,
	// each file counted once.
	MaxPlanBytes = 64 << 20
	// MaxPlanRenderBytes is how many bytes all renders of one plan may read
	// together, each render counted like MaxRenderBytes: every render keeps
	// what it decoded until the plan ends.
	MaxPlanRenderBytes = 64 << 20
	// MaxKustomizations is how many kustomizations one build may pass through: a
	// base included by two overlays of the build is built, and counted, twice.
	MaxKustomizations = 200
	// Timeout bounds one Plan or Render call; the work left when it passes is
	// abandoned and the call refused with CodeTimeout. A binary built with the
	// race detector, which only tests are, allows ten times as long (see timeout).
	Timeout = 5 * time.Second
)

// maxFileNodeEstimate bounds the nodes a file may hold, as estimated from its
// bytes before it is parsed (see estimateNodes): the check that keeps the parse
// that counts them exactly from costing the memory it guards against.
const maxFileNodeEstimate = 2 * MaxRenderNodes

// timeout is the Timeout in force, in nanoseconds: the service's render.timeout
// (SetTimeout), or a test's: under the race detector, which makes parsing many
// times slower, the bound a test is about must be what stops the plan, not the
// clock. For the same reason it starts at raceTimeoutFactor times Timeout: on a
// loaded machine under the race detector one plan of a few files took longer
// than Timeout, refused as render_timeout instead of what its test was about. It
// is atomic because a build abandoned at its deadline may still be reading it
// when a new one is set.
var timeout = newAtomicDuration(raceTimeoutFactor * Timeout)

// SetTimeout makes d the bound of every Plan and Render call that starts from now
// on, in place of Timeout; d <= 0 restores Timeout. A repository whose renders
// take longer on its own (a monorepo's overlay of thousands of objects, an
// umbrella chart) needs a longer one; a shorter one frees workers sooner.
func SetTimeout(d time.Duration) {
	if d <= 0 {
		d = raceTimeoutFactor * Timeout
	}
	timeout.Store(int64(d))
}

// CurrentTimeout is the bound of a Plan or Render call starting now.
func CurrentTimeout() time.Duration { return time.Duration(timeout.Load()) }

func newAtomicDuration(d time.Duration) *atomic.Int64 {
	v := new(atomic.Int64)
	v.Store(int64(d))
	return v
}

// timeoutCause is the cause of a context that reached its timeout, which it
// names: reading the timeout in force later could name a newer one.
type timeoutCause struct{ after time.Duration }

func (c timeoutCause) Error() string { return "render timeout after " + c.after.String() }

// yamlScan is what a file holds as YAML: documents and nodes (aliases expanded),
// up to the first thing that does not parse. A file that is not YAML at all (a
// generator's source file) holds nothing; its decoder, if any, reports why.
type yamlScan struct {
	docs, nodes int
	err         error // a *Refusal: the file exceeds a bound
}

// scanYAML checks one file against the per-file bounds and counts what it holds.
func scanYAML(file string, data []byte) yamlScan {
	if len(data) > MaxFileSize {
		return yamlScan{err: refuse(CodeFileTooLarge, "%s is over the %d byte limit", file, MaxFileSize)}
	}
	est := estimateNodes(data)
	if est > maxFileNodeEstimate {
		return yamlScan{err: refuse(CodeTooLarge, "%s: about %d YAML nodes, at most %d", file, est, maxFileNodeEstimate)}
	}
	if est <= MaxDepth && bytes.IndexByte(data, '&') < 0 {
		// So few nodes cannot nest or spread beyond a bound, and without an
		// anchor no alias expands: the estimate is count enough. Parsing is what
		// costs here (a large file of few long scalars parses slowly).
		docs := 1 + bytes.Count(data, []byte("---")) + bytes.Count(data, []byte("..."))
		return yamlScan{docs: min(docs, est), nodes: est}
	}
	var s yamlScan
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			// io.EOF, or the first thing that is not YAML: whoever decodes the
			// file stops there too, having seen only what was counted.
			return s
		}
		s.docs++
		if s.docs > MaxRenderDocuments {
			return yamlScan{err: refuse(CodeTooLarge, "%s: more than %d YAML documents, at most %d", file, MaxRenderDocuments, MaxRenderDocuments)}
		}
		c := nodeCounter{sizes: map[*yaml.Node]nodeSize{}}
		size := c.measure(&doc)
		switch {
		case c.cyclic:
			return yamlScan{err: refuse(CodeAliasBomb, "%s: document %d (line %d): a YAML alias refers to itself", file, s.docs, doc.Line)}
		case c.aliased > MaxAliasNodes:
			return yamlScan{err: refuse(CodeAliasBomb, "%s: document %d (line %d): YAML aliases expand to more than %d nodes", file, s.docs, doc.Line, MaxAliasNodes)}
		case c.widest > MaxMappingKeys:
			return yamlScan{err: refuse(CodeTooLarge, "%s: document %d (line %d): a mapping of %d keys, at most %d", file, s.docs, doc.Line, c.widest, MaxMappingKeys)}
		case size.height > MaxDepth:
			return yamlScan{err: refuse(CodeTooLarge, "%s: document %d (line %d): nested %d levels deep, at most %d", file, s.docs, doc.Line, size.height, MaxDepth)}
		}
		s.nodes += size.nodes
		if s.nodes > MaxRenderNodes {
			return yamlScan{err: refuse(CodeTooLarge, "%s: more than %d YAML nodes, at most %d", file, MaxRenderNodes, MaxRenderNodes)}
		}
	}
}

// estimateNodes returns an upper bound on the YAML nodes data parses into,
// without parsing it. Every node but a document's root starts after an indicator
// or a line break: a flow entry after "[", "{" or "," (a flow mapping's "{" or
// "," may start a key and its empty value), a block item after "-", a key after
// a line break, a value after ":" (a key and its value: two), and a key after
// "?" (with its value, given or not: two). Indicators inside strings and
// comments count too; the bound is loose, never low.
func estimateNodes(data []byte) int {
	n := 2 // a document and its root
	for _, b := range data {
		switch b {
		case '{':
			n += 3
		case ',', ':', '?':
			n += 2
		case '[', '-', '\n':
			n++
		}
	}
	return n
}

// nodeSize is a node's size once its aliases are expanded: its nodes, its depth,
// and the bytes of its scalars.
type nodeSize struct {
	nodes, height, bytes int
}

// nodeCounter measures a document, each anchored node once, so an alias costs
// what its anchor's value costs without being expanded.
type nodeCounter struct {
	sizes   map[*yaml.Node]nodeSize // anchored nodes measured so far
	aliased int                     // nodes added by aliases
	widest  int                     // keys of the largest mapping
	cyclic  bool
}

// inProgress marks an anchored node being measured: an alias that reaches it
// again is a cycle (the YAML parser refuses those; the counter does not rely on it).
var inProgress = nodeSize{nodes: -1}

func (c *nodeCounter) measure(n *yaml.Node) nodeSize {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return nodeSize{nodes: 1, height: 1}
		}
		s := c.measure(n.Alias)
		c.aliased += s.nodes
		return s
	}
	if n.Anchor != "" {
		if s, ok := c.sizes[n]; ok {
			if s == inProgress {
				c.cyclic = true
				return nodeSize{}
			}
			return s
		}
		c.sizes[n] = inProgress
	}
	if n.Kind == yaml.MappingNode {
		c.widest = max(c.widest, len(n.Content)/2)
	}
	s := nodeSize{nodes: 1, bytes: len(n.Value)}
	for _, child := range n.Content {
		cs := c.measure(child)
		// Saturate instead of overflowing: anything this large is refused.
		s.nodes = min(s.nodes+cs.nodes, 1<<40)
		s.bytes = min(s.bytes+cs.bytes, 1<<40)
		s.height = max(s.height, cs.height)
	}
	s.height++
	if n.Anchor != "" {
		c.sizes[n] = s
	}
	return s
}

// readBudget counts what one render reads against the per-render bounds, and
// stops the render's reads once its context is done (kustomize cannot be
// cancelled, but it stops at its next read).
type readBudget struct {
	ctx context.Context
	// plan counts the reads of every render of the plan.
	plan *tree

	mu                 sync.Mutex
	bytes, docs, nodes int
	// failure is the first bound a read exceeded: kustomize wraps the read
	// error in its own words, and the render reports the bound instead.
	failure error
}

func newReadBudget(ctx context.Context, plan *tree) *readBudget {
	return &readBudget{ctx: ctx, plan: plan}
}

// take accounts for one read of file whose own check gave s and err.
func (b *readBudget) take(file string, size int, s yamlScan, err error) error {
	if cerr := contextError(b.ctx); cerr != nil {
		return cerr
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		b.bytes += size
		b.docs += s.docs
		b.nodes += s.nodes
		switch {
		case b.bytes > MaxRenderBytes:
			err = refuse(CodeTooLarge, "reading %s: the render reads more than %d bytes, at most %d", file, MaxRenderBytes, MaxRenderBytes)
		case b.docs > MaxRenderDocuments:
			err = refuse(CodeTooLarge, "reading %s: the render reads more than %d YAML documents, at most %d", file, MaxRenderDocuments, MaxRenderDocuments)
		case b.nodes > MaxRenderNodes:
			err = refuse(CodeTooLarge, "reading %s: the render reads more than %d YAML nodes, at most %d", file, MaxRenderNodes, MaxRenderNodes)
		case b.plan.rendered(size) > MaxPlanRenderBytes:
			err = refuse(CodeTooLarge, "reading %s: the plan's renders read more than %d bytes together, at most %d", file, MaxPlanRenderBytes, MaxPlanRenderBytes)
		}
	}
	var ref *Refusal
	if b.failure == nil && errors.As(err, &ref) {
		b.failure = err
	}
	return err
}

// takeIfFits accounts for a read of size bytes whose own check gave s, if it
// keeps within every bound: a read ahead of the build (see readAhead), which
// must not fail on a bound the build might not reach.
func (b *readBudget) takeIfFits(size int, s yamlScan) bool {
	if contextError(b.ctx) != nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bytes+size > MaxRenderBytes || b.docs+s.docs > MaxRenderDocuments || b.nodes+s.nodes > MaxRenderNodes || !b.plan.renderedIfFits(size) {
		return false
	}
	b.bytes += size
	b.docs += s.docs
	b.nodes += s.nodes
	return true
}

// giveBack undoes a takeIfFits of a read the build did not make.
func (b *readBudget) giveBack(size int, s yamlScan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bytes -= size
	b.docs -= s.docs
	b.nodes -= s.nodes
	b.plan.rendered(-size)
}

// exceeded returns the first bound a read of the render exceeded, if any.
func (b *readBudget) exceeded() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failure
}

// withTimeout bounds a Plan or Render call by Timeout. The call's builds count
// their use of the slots of tools that run one build at a time (slotUse), so a
// call whose time ran out while it only waited says so.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	d := time.Duration(timeout.Load())
	if slotUseOf(ctx) == nil {
		ctx = context.WithValue(ctx, slotUseKey{}, new(slotUse))
	}
	return context.WithTimeoutCause(ctx, d, timeoutCause{after: d})
}

// slotUse is how the builds of one timed call use the slots of tools that run
// one build at a time (see runInSlot): how many waited for a slot and never got
// it (a wait that ends with the call's context is never taken back: the call is
// over), and how many run. A call whose time ran out with builds waiting and none
// running spent it waiting for other calls' builds, possibly one abandoned at its
// own deadline that still runs.
type slotUse struct {
	waiting, running atomic.Int32

	// builds are the call's kustomize builds under way, oldest first, and those
	// its deadline stopped: a call that returns at its deadline without waiting
	// for its work to stop (Plan) names the build it stopped, as the build
	// itself does (see buildTimedOut).
	mu     sync.Mutex
	builds []*buildUnderWay
}

// buildUnderWay is a kustomize build of an app's kustomization.
type buildUnderWay struct{ app, root string }

// building records a build of app's kustomization root under ctx's call and
// returns the function that ends it. A build that ends with the call's context
// done stays recorded: it is what the deadline stopped.
func building(ctx context.Context, app, root string) (end func()) {
	u := slotUseOf(ctx)
	if u == nil {
		return func() {}
	}
	b := &buildUnderWay{app: app, root: root}
	u.mu.Lock()
	u.builds = append(u.builds, b)
	u.mu.Unlock()
	return func() {
		if ctx.Err() != nil {
			return
		}
		u.mu.Lock()
		defer u.mu.Unlock()
		u.builds = slices.DeleteFunc(u.builds, func(o *buildUnderWay) bool { return o == b })
	}
}

// stoppedBuild is the oldest build of ctx's call still under way or stopped by
// its deadline, if any.
func stoppedBuild(ctx context.Context) *buildUnderWay {
	u := slotUseOf(ctx)
	if u == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.builds) == 0 {
		return nil
	}
	return u.builds[0]
}

type slotUseKey struct{}

func slotUseOf(ctx context.Context) *slotUse {
	u, _ := ctx.Value(slotUseKey{}).(*slotUse)
	return u
}

// contextError is the error a render returns once ctx is done: a refusal when its
// own Timeout passed (the repository is too slow to render), the context's error
// when the caller gave up.
func contextError(ctx context.Context) error {
	if ctx == nil || ctx.Err() == nil {
		return nil
	}
	var cause timeoutCause
	if errors.As(context.Cause(ctx), &cause) {
		if u := slotUseOf(ctx); u != nil && u.waiting.Load() > 0 && u.running.Load() == 0 {
			return refuse(CodeTimeout, "rendering took longer than %s waiting for other kustomize builds to end (as many run at once as there are kustomize workers); this render's build never started", cause.after)
		}
		return refuse(CodeTimeout, "rendering took longer than %s; the work was stopped", cause.after)
	}
	return ctx.Err()
}

// callTimedOut is the error of a call that returns as soon as its ctx is done,
// without waiting for its work (Plan): contextError, naming the app and
// kustomization of the build it stopped, if one was under way.
func callTimedOut(ctx context.Context) error {
	err := contextError(ctx)
	if b := stoppedBuild(ctx); b != nil {
		return buildTimedOut(err, b.app, b.root)
	}
	return err
}

// timedOut turns err into the timeout refusal when ctx reached its Timeout: a
// render stopped half way fails in whatever way it happened to stop. A timeout
// refusal already (one that names what was stopped) stays.
func timedOut(ctx context.Context, err error) error {
	var ref *Refusal
	if err == nil || errors.As(err, &ref) && ref.Code == CodeTimeout {
		return err
	}
	if cerr := callTimedOut(ctx); cerr != nil {
		return cerr
	}
	return err
}
