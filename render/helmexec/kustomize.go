package helmexec

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/openapi"
)

// KustomizeJob is one kustomize build.
type KustomizeJob struct {
	// Root is the directory of the kustomization in the file system the build
	// reads.
	Root string
	// Options are the build's options; plugins must be disabled (a worker runs
	// none).
	Options *krusty.Options
	// OutputLimit is how many bytes the resources may take as the worker sends
	// them; more is ErrOutputTooLarge.
	OutputLimit int
	// Started, when set, is called once the build has a worker slot: before
	// that it waited for other builds.
	Started func()
	// Expected are the paths of the file system the build is expected to
	// resolve and read (its kustomizations' directories and files, the files
	// they name). Their answers go with the request, made on the file system as
	// its calls would be (CleanedAbs of each, and ReadFile of each that is a
	// file): the worker answers a call of one of them from its answer, each read
	// once, and forwards every other call as it would without them, so the build
	// reads the same whatever the prediction. A build that writes drops them
	// all: what it reads after its write is read from the file system.
	Expected []string
	// ReadAhead reads an expected file for the request, as ReadFile would and
	// counted as its read; false leaves the file, and every expected file after
	// it, to be read when the build asks for it (its read would fail, or would
	// pass a bound, which the build then passes where it does in process). Nil
	// reads with ReadFile. Expected is best in the order the build reads.
	ReadAhead func(path string) ([]byte, bool)
	// Unread, when set, is told of each file ReadAhead read that the build did
	// not read from the request, once the build ended.
	Unread func(path string)
	// OwnSchema says a kustomization of the build names its own OpenAPI
	// schema (openapi: path or version); see RunKustomizer.
	OwnSchema bool
}

// builtinSchema is the schema version kustomize reports with no schema set.
var builtinSchema = openapi.GetSchemaVersion()

// RunKustomizer runs k on root as a kustomize process of its own (Argo CD's)
// would, as far as kustomize's OpenAPI schema goes: kustomize keeps the schema
// in process-wide globals, so a custom schema's definitions were added to the
// Kubernetes ones an earlier build had parsed (its lists then merged by name
// where kustomize alone replaces them), and the custom schema stayed for the
// builds after it. A build whose kustomizations name a schema of their own
// (ownSchema) starts from none, and a build that leaves any other than the
// built-in default set leaves none; the built-in schema, which the builds that
// name none share, stays parsed. Builds of one process must not overlap.
func RunKustomizer(k *krusty.Kustomizer, fsys filesys.FileSystem, root string, ownSchema bool) (resmap.ResMap, error) {
	if ownSchema {
		openapi.ResetOpenAPI()
	}
	defer func() {
		if ownSchema || openapi.GetSchemaVersion() != builtinSchema {
			openapi.ResetOpenAPI()
		}
	}()
	return k.Run(fsys, root)
}

// BuildError is kustomize's own error for the kustomization, told as kustomize
// tells it.
type BuildError struct{ Message string }

func (e *BuildError) Error() string { return e.Message }

// kustomizeRequest is a KustomizeJob as a worker receives it.
type kustomizeRequest struct {
	Root             string
	Reorder          krusty.ReorderOption
	LoadRestrictions types.LoadRestrictions
	OutputLimit      int
	OwnSchema        bool
	// Answers are the answers to the calls of the job's expected paths.
	Answers []answeredCall
}

// answeredCall is a file system call answered before the build asked for it.
type answeredCall struct {
	Call  fsCall
	Reply fsReply
}

// answerExpected makes the calls of kj's expected paths on fsys.
func answerExpected(fsys filesys.FileSystem, kj KustomizeJob) []answeredCall {
	if len(kj.Expected) == 0 {
		return nil
	}
	readAhead := kj.ReadAhead
	if readAhead == nil {
		readAhead = func(p string) ([]byte, bool) {
			data, err := fsys.ReadFile(p)
			return data, err == nil
		}
	}
	out := make([]answeredCall, 0, 2*len(kj.Expected))
	seen := make(map[string]bool, len(kj.Expected))
	reading := true
	for _, p := range kj.Expected {
		if seen[p] {
			continue
		}
		seen[p] = true
		c := fsCall{Op: opCleanedAbs, Path: p}
		r := serveFS(fsys, &c)
		out = append(out, answeredCall{Call: c, Reply: r})
		if !reading || r.Err != "" || r.File == "" {
			continue
		}
		data, ok := readAhead(p)
		if reading = ok; ok {
			out = append(out, answeredCall{Call: fsCall{Op: opReadFile, Path: p}, Reply: fsReply{Data: data}})
		}
	}
	return out
}

// Kustomize runs "kustomize build" of job.Root in a worker. The worker's file
// system is fsys: every call kustomize makes on it is answered from fsys, ahead
// of the build for the paths job expects (see KustomizeJob.Expected) and
// forwarded to this process in the order kustomize makes them for the others,
// so the build reads exactly what it would read from fsys in process, through
// fsys's own checks, and what it writes lands in fsys. The answer is each
// resource's map, in the build's order; what kustomize printed is printed on
// os.Stderr. The error is a *BuildError for kustomize's failures, a
// *LimitError when the build took more than a worker allows,
// ErrOutputTooLarge, ctx's error when it ended first (the worker killed), or a
// failure to run a worker (a panic in kustomize among them).
func (p *Pool) Kustomize(ctx context.Context, fsys filesys.FileSystem, kj KustomizeJob) ([]map[string]any, error) {
	var ev RenderEvent
	res, err := p.kustomize(ctx, fsys, kj, &ev)
	ev.Outcome = outcomeOf(err)
	p.observer().Rendered(ev)
	return res, err
}

func (p *Pool) kustomize(ctx context.Context, fsys filesys.FileSystem, kj KustomizeJob, ev *RenderEvent) ([]map[string]any, error) {
	o := kj.Options
	if o == nil {
		o = krusty.MakeDefaultOptions()
	}
	if o.PluginConfig != nil && o.PluginConfig.PluginRestrictions != types.PluginRestrictionsBuiltinsOnly {
		return nil, errors.New("kustomize plugins do not run in a worker")
	}
	if o.AddManagedbyLabel {
		return nil, errors.New("a kustomize worker does not add the managed-by label")
	}
	req := request{Kustomize: &kustomizeRequest{
		Root: kj.Root, Reorder: o.Reorder, LoadRestrictions: o.LoadRestrictions, OutputLimit: kj.OutputLimit, OwnSchema: kj.OwnSchema,
	}}
	resp, err := p.run(ctx, job{
		tool: toolKustomize, req: req, limit: int64(kj.OutputLimit) + responseSlack,
		serve: func(c *fsCall) fsReply { return serveFS(fsys, c) }, started: kj.Started,
		// Read ahead once the build has its worker: a build that waited until
		// its deadline reads nothing.
		prepare: func(r *request) { r.Kustomize.Answers = answerExpected(fsys, kj) },
	}, ev)
	ev.Forwarded, ev.Answered = resp.Forwarded, resp.Answered
	if kj.Unread != nil {
		tellUnread(req.Kustomize.Answers, resp.ReadAnswered, kj.Unread)
	}
	if err != nil {
		return nil, err
	}
	if resp.Printed != "" {
		// Where a build in process prints it: the service turns it into log
		// entries (see package logging).
		fmt.Fprint(os.Stderr, resp.Printed)
	}
	switch {
	case resp.Panic != "":
		return nil, fmt.Errorf("kustomize panicked: %s", resp.Panic)
	case resp.TooLarge:
		return nil, ErrOutputTooLarge
	case resp.Err != "":
		return nil, &BuildError{Message: resp.Err}
	}
	return resp.Resources, nil
}

// tellUnread tells unread of each file answered that the build did not read:
// read lists those it did, by index (none when the worker gave no answer).
func tellUnread(answers []answeredCall, read []int, unread func(string)) {
	wasRead := make([]bool, len(answers))
	for _, i := range read {
		if i >= 0 && i < len(answers) {
			wasRead[i] = true
		}
	}
	for i, a := range answers {
		if a.Call.Op == opReadFile && !wasRead[i] {
			unread(a.Call.Path)
		}
	}
}

// maxPrinted bounds what a build in a worker may print and have passed on.
const maxPrinted = 64 << 10

// runKustomize builds req's kustomization over fsys, in a worker. What kustomize
// prints (its deprecation warnings, on os.Stderr and the standard logger) is
// part of the answer: the worker's own stderr tells its parent why it ended.
func runKustomize(req *kustomizeRequest, remote *remoteFS) (resp response) {
	fsys := newAnsweredFS(remote, req.Answers)
	defer func() {
		resp.Forwarded, resp.Answered, resp.ReadAnswered = remote.calls, fsys.answered, fsys.read
	}()
	printed, err := capturePrinted()
	if err != nil {
		return response{Panic: fmt.Sprintf("capture kustomize's output: %v", err)}
	}
	defer func() { resp.Printed = printed.end() }()
	return buildKustomization(req, fsys)
}

func buildKustomization(req *kustomizeRequest, fsys filesys.FileSystem) response {
	opts := &krusty.Options{
		Reorder:          req.Reorder,
		LoadRestrictions: req.LoadRestrictions,
		PluginConfig:     types.DisabledPluginConfig(),
	}
	resMap, err := RunKustomizer(krusty.MakeKustomizer(opts), fsys, req.Root, req.OwnSchema)
	if err != nil {
		return response{Err: err.Error()}
	}
	out := make([]map[string]any, 0, resMap.Size())
	for _, res := range resMap.Resources() {
		m, err := res.Map()
		if err != nil {
			return response{Panic: fmt.Sprintf("read rendered object %s: %v", res.CurId(), err)}
		}
		out = append(out, m)
	}
	return response{Resources: out}
}

// printedOutput is os.Stderr and the standard logger of a worker during a build.
type printedOutput struct {
	stderr *os.File
	logOut io.Writer
	w      *os.File
	done   chan []byte
}

func capturePrinted() (*printedOutput, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p := &printedOutput{stderr: os.Stderr, logOut: log.Writer(), w: w, done: make(chan []byte, 1)}
	go func() {
		data, _ := io.ReadAll(io.LimitReader(r, maxPrinted))
		_, _ = io.Copy(io.Discard, r)
		r.Close()
		p.done <- data
	}()
	os.Stderr = w
	log.SetOutput(w)
	return p, nil
}

// end restores the outputs and returns what was printed.
func (p *printedOutput) end() string {
	os.Stderr = p.stderr
	log.SetOutput(p.logOut)
	p.w.Close()
	return string(<-p.done)
}

// The file system calls a worker forwards, by the name of the method of
// filesys.FileSystem.
const (
	opReadFile   = "ReadFile"
	opExists     = "Exists"
	opIsDir      = "IsDir"
	opReadDir    = "ReadDir"
	opGlob       = "Glob"
	opCleanedAbs = "CleanedAbs"
	opWriteFile  = "WriteFile"
	opCreate     = "Create"
	opMkdir      = "Mkdir"
	opMkdirAll   = "MkdirAll"
	opRemoveAll  = "RemoveAll"
)

// fsCall is a file system call of a build in a worker, which its parent makes.
type fsCall struct {
	Op   string
	Path string
	Data []byte
}

// fsReply is the result of an fsCall.
type fsReply struct {
	Bool  bool
	Names []string
	Data  []byte
	// Dir and File are CleanedAbs's answer.
	Dir, File string
	// Err is the call's error; NotExist says it is fs.ErrNotExist, which the
	// worker's error then is too.
	Err      string
	NotExist bool
}

// serveFS makes c on fsys.
func serveFS(fsys filesys.FileSystem, c *fsCall) fsReply {
	var r fsReply
	var err error
	switch c.Op {
	case opReadFile:
		r.Data, err = fsys.ReadFile(c.Path)
	case opExists:
		r.Bool = fsys.Exists(c.Path)
	case opIsDir:
		r.Bool = fsys.IsDir(c.Path)
	case opReadDir:
		r.Names, err = fsys.ReadDir(c.Path)
	case opGlob:
		r.Names, err = fsys.Glob(c.Path)
	case opCleanedAbs:
		var dir filesys.ConfirmedDir
		dir, r.File, err = fsys.CleanedAbs(c.Path)
		r.Dir = string(dir)
	case opWriteFile:
		err = fsys.WriteFile(c.Path, c.Data)
	case opCreate:
		var f filesys.File
		if f, err = fsys.Create(c.Path); err == nil {
			f.Close()
			// The file exists in fsys now; what the build writes into it
			// cannot follow it there.
			err = fmt.Errorf("create %s: a kustomize build in a worker writes whole files only", c.Path)
		}
	case opMkdir:
		err = fsys.Mkdir(c.Path)
	case opMkdirAll:
		err = fsys.MkdirAll(c.Path)
	case opRemoveAll:
		err = fsys.RemoveAll(c.Path)
	default:
		err = fmt.Errorf("unknown file system call %q", c.Op)
	}
	if err != nil {
		r.Err, r.NotExist = err.Error(), errors.Is(err, fs.ErrNotExist)
	}
	return r
}

// remoteFS is the file system of a build in a worker: each call is made by the
// parent, over the worker's stdout (the call) and stdin (its reply).
type remoteFS struct {
	in  *bufio.Reader
	out *bufio.Writer
	// calls counts the calls made in the parent.
	calls int
}

var _ filesys.FileSystem = (*remoteFS)(nil)

// call makes c in the parent. A worker that cannot reach its parent has no one
// to answer to: it ends.
func (f *remoteFS) call(c fsCall) (fsReply, error) {
	f.calls++
	if err := writeValue(f.out, response{Call: &c}); err != nil {
		fmt.Fprintln(os.Stderr, "kustomize worker: send a file system call:", err)
		os.Exit(exitBadStart)
	}
	var r fsReply
	if err := readFrame(f.in, maxRequestBytes, &r); err != nil {
		fmt.Fprintln(os.Stderr, "kustomize worker: read a file system reply:", err)
		os.Exit(exitBadStart)
	}
	if r.Err != "" {
		return r, &remoteError{msg: r.Err, notExist: r.NotExist}
	}
	return r, nil
}

// remoteError is an error of a call the parent made, as it worded it.
type remoteError struct {
	msg      string
	notExist bool
}

func (e *remoteError) Error() string { return e.msg }

func (e *remoteError) Is(target error) bool { return e.notExist && target == fs.ErrNotExist }

func (f *remoteFS) ReadFile(p string) ([]byte, error) {
	r, err := f.call(fsCall{Op: opReadFile, Path: p})
	return r.Data, err
}

// Open is not forwarded: a build reads files whole (ReadFile), and a handle
// cannot be carried between processes.
func (f *remoteFS) Open(p string) (filesys.File, error) {
	return nil, fmt.Errorf("open %s: a kustomize build in a worker reads whole files only", p)
}

func (f *remoteFS) Exists(p string) bool {
	r, _ := f.call(fsCall{Op: opExists, Path: p})
	return r.Bool
}

func (f *remoteFS) IsDir(p string) bool {
	r, _ := f.call(fsCall{Op: opIsDir, Path: p})
	return r.Bool
}

func (f *remoteFS) ReadDir(p string) ([]string, error) {
	r, err := f.call(fsCall{Op: opReadDir, Path: p})
	return r.Names, err
}

func (f *remoteFS) Glob(pattern string) ([]string, error) {
	r, err := f.call(fsCall{Op: opGlob, Path: pattern})
	return r.Names, err
}

func (f *remoteFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	r, err := f.call(fsCall{Op: opCleanedAbs, Path: p})
	return filesys.ConfirmedDir(r.Dir), r.File, err
}

func (f *remoteFS) WriteFile(p string, data []byte) error {
	_, err := f.call(fsCall{Op: opWriteFile, Path: p, Data: data})
	return err
}

func (f *remoteFS) Create(p string) (filesys.File, error) {
	_, err := f.call(fsCall{Op: opCreate, Path: p})
	return nil, err
}

func (f *remoteFS) Mkdir(p string) error {
	_, err := f.call(fsCall{Op: opMkdir, Path: p})
	return err
}

func (f *remoteFS) MkdirAll(p string) error {
	_, err := f.call(fsCall{Op: opMkdirAll, Path: p})
	return err
}

func (f *remoteFS) RemoveAll(p string) error {
	_, err := f.call(fsCall{Op: opRemoveAll, Path: p})
	return err
}

// Walk is not forwarded: a build never walks a directory (only kustomize's
// localizer does), and a walk's callback cannot run in the parent.
func (f *remoteFS) Walk(p string, _ filepath.WalkFunc) error {
	return fmt.Errorf("walk %s: a kustomize build in a worker does not walk directories", p)
}

// answeredFS is the file system of a build in a worker whose request answered
// some of its calls: those it answers as the parent did, a read once; it
// forwards every other call to the parent. A write, after which an answer
// made before it may be wrong, drops them all.
type answeredFS struct {
	*remoteFS
	answers map[callKey]answerAt
	// answered counts the calls answered here; read lists the files read
	// from their answers, by the index of the answer in the request.
	answered int
	read     []int
}

// answerAt is an answer of a request and its index there.
type answerAt struct {
	reply fsReply
	index int
}

var _ filesys.FileSystem = (*answeredFS)(nil)

func newAnsweredFS(remote *remoteFS, answers []answeredCall) *answeredFS {
	f := &answeredFS{remoteFS: remote, answers: make(map[callKey]answerAt, len(answers))}
	for i, a := range answers {
		f.answers[callKey{a.Call.Op, a.Call.Path}] = answerAt{a.Reply, i}
	}
	return f
}

// callKey is a call that carries no data.
type callKey struct{ op, path string }

// answer is the reply to the call op of p made before the build asked.
func (f *answeredFS) answer(op, p string) (fsReply, bool) {
	c := callKey{op, p}
	a, ok := f.answers[c]
	if !ok {
		return fsReply{}, false
	}
	f.answered++
	if op == opReadFile {
		// A read is counted as the parent read it: once. Another read of the
		// file is the parent's again.
		delete(f.answers, c)
		f.read = append(f.read, a.index)
	}
	return a.reply, true
}

func (f *answeredFS) ReadFile(p string) ([]byte, error) {
	if r, ok := f.answer(opReadFile, p); ok {
		return r.Data, nil
	}
	return f.remoteFS.ReadFile(p)
}

func (f *answeredFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	if r, ok := f.answer(opCleanedAbs, p); ok {
		if r.Err != "" {
			return "", "", &remoteError{msg: r.Err, notExist: r.NotExist}
		}
		return filesys.ConfirmedDir(r.Dir), r.File, nil
	}
	return f.remoteFS.CleanedAbs(p)
}

func (f *answeredFS) WriteFile(p string, data []byte) error {
	clear(f.answers)
	return f.remoteFS.WriteFile(p, data)
}

func (f *answeredFS) Create(p string) (filesys.File, error) {
	clear(f.answers)
	return f.remoteFS.Create(p)
}

func (f *answeredFS) Mkdir(p string) error {
	clear(f.answers)
	return f.remoteFS.Mkdir(p)
}

func (f *answeredFS) MkdirAll(p string) error {
	clear(f.answers)
	return f.remoteFS.MkdirAll(p)
}

func (f *answeredFS) RemoveAll(p string) error {
	clear(f.answers)
	return f.remoteFS.RemoveAll(p)
}
