package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// RevertRequest asks for the edit that undoes an earlier verified change, on the
// tree as it is now, and for its proof.
type RevertRequest struct {
	// RepoDir, TreeID, Apps, App and BeforeRender are as in Request, for the tree the
	// revert is made on (the base branch as it is now).
	RepoDir      string
	TreeID       string
	Apps         []Application
	App          string
	BeforeRender func(ctx context.Context, app Application) ([]Object, error)
	// OriginalDir is the tree the change was made on (its base commit);
	// OriginalTreeID and OriginalRender are TreeID and BeforeRender for it.
	OriginalDir    string
	OriginalTreeID string
	OriginalRender func(ctx context.Context, app Application) ([]Object, error)
	// Edits are the change's file edits: Old as in OriginalDir, New as the change
	// wrote it (Created: the change added the file; New nil: it removed it).
	Edits []FileEdit
}

// Revert undoes a change the way git revert does, and proves it the way Plan proves
// an edit. Each edited file gets back the lines the change replaced, while every
// line changed by others since stays; a file the change created is removed. Then
// every affected Application is rendered before and after the revert and must
// render exactly as expected: each object the change modified has the fields the
// change set back at their values before it (and nothing else differs), an object
// it added is gone, one it removed is back, every other object is unchanged. What
// the change did is measured, not assumed: the tree it was made on is rendered
// without and with its edits, with the Applications as they are now.
//
// When the lines, files or fields the change wrote have been changed since, the
// revert would undo those changes too: it is refused (CodeNoLongerApplies) naming
// the place. Like Plan, Revert runs under Timeout and within the bounds on what it
// reads.
func Revert(ctx context.Context, req RevertRequest) (*Result, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	res, err := revert(ctx, req)
	return res, timedOut(ctx, err)
}

func revert(ctx context.Context, req RevertRequest) (res *Result, err error) {
	if len(req.Edits) == 0 {
		return nil, refuse(CodeInvalidRequest, "the change to revert edited no file")
	}
	p, err := openPlanner(ctx, Request{RepoDir: req.RepoDir, TreeID: req.TreeID, Apps: req.Apps, App: req.App, BeforeRender: req.BeforeRender})
	if err != nil {
		return nil, err
	}
	orig, err := openPlanner(ctx, Request{RepoDir: req.OriginalDir, TreeID: req.OriginalTreeID, Apps: req.Apps, App: req.App, BeforeRender: req.OriginalRender})
	if err != nil {
		return nil, err
	}
	// Free text may quote what a tool could not read in either tree, as a
	// plan's may; see scrub.go.
	defer func() {
		if err == nil && !hasFreeText(res) {
			return
		}
		s := newScrubber(append(p.t.secretValues(req.Apps), orig.t.secretValues(req.Apps)...))
		if err != nil {
			err = s.err(err)
			return
		}
		s.result(res)
	}()
	defer p.precomputeReaches()()
	c, err := p.revertCandidate(req.Edits)
	if err != nil {
		return nil, err
	}
	if err := p.canonicalize(c); err != nil {
		return nil, err
	}
	written := make(map[string][]byte, len(req.Edits))
	for _, e := range req.Edits {
		written[e.Path] = e.New
	}
	vr, err := p.verify(ctx, c, &revertExpectation{orig: orig, after: orig.before.with(written)})
	if err != nil {
		return nil, err
	}
	attempts := []Attempt{{Strategy: c.strategy, Files: c.paths(), Verified: vr.ok, Reason: vr.reason}}
	if !vr.ok {
		code := CodeVerificationFailed
		if vr.leak {
			code = CodeLeak
		}
		return nil, p.refusal(code, "the revert does not undo exactly the change: "+vr.reason, attempts)
	}
	return p.result(c, vr, attempts)
}

// revertCandidate computes the reverted files on the current tree.
func (p *planner) revertCandidate(edits []FileEdit) (*candidate, error) {
	c := &candidate{strategy: "revert", files: map[string][]byte{}, created: map[string]bool{}}
	changes := 0
	for _, e := range edits {
		cur, err := p.t.readFile(e.Path)
		exists := err == nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		switch {
		case e.Created:
			if !exists {
				return nil, refuse(CodeNoLongerApplies, "%s, which the change added, has been removed since", e.Path)
			}
			if !bytes.Equal(cur, e.New) {
				return nil, refuse(CodeNoLongerApplies, "%s, which the change added, has been edited since; removing it would remove those edits too", e.Path)
			}
			c.files[e.Path] = nil
			changes++
		case e.New == nil:
			if exists {
				return nil, refuse(CodeNoLongerApplies, "%s, which the change removed, has been added again since", e.Path)
			}
			c.files[e.Path], c.created[e.Path] = e.Old, true
			changes++
		default:
			if !exists {
				return nil, refuse(CodeNoLongerApplies, "%s, which the change edited, has been removed since", e.Path)
			}
			reverted, err := revertLines(e.Path, e.Old, e.New, cur)
			if err != nil {
				return nil, err
			}
			if !bytes.Equal(reverted, cur) {
				changes++
			}
			c.files[e.Path] = reverted
		}
	}
	if changes == 0 {
		return nil, refuse(CodeNoChange, "the files the change edited no longer hold it: there is nothing to revert")
	}
	return c, nil
}

// lineHunk replaces lines [from, to) of a base with lines.
type lineHunk struct {
	from, to int
	lines    []string
}

func lineHunks(base, other []string) []lineHunk {
	var out []lineHunk
	for _, op := range difflib.NewMatcher(base, other).GetOpCodes() {
		if op.Tag != 'e' {
			out = append(out, lineHunk{from: op.I1, to: op.I2, lines: other[op.J1:op.J2]})
		}
	}
	return out
}

// revertLines undoes the change old → new in cur, a later version of new: the lines
// the change replaced come back and every other line of cur stays (a three-way
// merge with new as the base, as git revert does). When lines the change wrote
// have been changed since, there is no revert of them.
func revertLines(file string, old, new, cur []byte) ([]byte, error) {
	if bytes.Equal(cur, new) {
		return old, nil
	}
	base := splitLines(new)
	undo, since := lineHunks(base, splitLines(old)), lineHunks(base, splitLines(cur))
	all := append([]lineHunk(nil), undo...)
	for _, s := range since {
		same := false
		for _, u := range undo {
			if u.from == s.from && u.to == s.to && slices.Equal(u.lines, s.lines) {
				same = true // reverted by hand already: once is enough
				break
			}
			overlap := u.from < s.to && s.from < u.to
			sameInsert := u.from == u.to && s.from == s.to && u.from == s.from
			if overlap || sameInsert {
				return nil, refuse(CodeNoLongerApplies, "%s: the lines the change wrote (from line %d) have been changed since; revert it by hand or submit a new change", file, u.from+1)
			}
		}
		if !same {
			all = append(all, s)
		}
	}
	// Insertions go before a replacement starting at the same line.
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].from != all[j].from {
			return all[i].from < all[j].from
		}
		return all[i].from == all[i].to && all[j].from != all[j].to
	})
	var b strings.Builder
	at := 0
	for _, h := range all {
		for ; at < h.from; at++ {
			b.WriteString(base[at])
		}
		for _, l := range h.lines {
			b.WriteString(l)
		}
		at = max(at, h.to)
	}
	for ; at < len(base); at++ {
		b.WriteString(base[at])
	}
	return []byte(b.String()), nil
}

// revertExpectation: every object the change touched is back as it was before the
// change, everything else stays.
type revertExpectation struct {
	orig  *planner
	after *view // the original tree with the change
}

func (e *revertExpectation) expect(app Application, current map[objKey]*object) (map[objKey]*object, error) {
	before, berr := e.orig.render(e.orig.before, app)
	after, aerr := e.orig.render(e.after, app)
	switch {
	case berr != nil && aerr != nil:
		// The app does not render from the tree the change was made on (it came
		// later): the change did not change it, so the revert must not either.
		return current, nil
	case berr != nil || aerr != nil:
		return nil, &Refusal{Code: CodeNoLongerApplies, App: app.Name, Reason: fmt.Sprintf("application %s renders on only one side of the change: %s", app.Name, reasonOf(errors.Join(berr, aerr)))}
	}
	bk, err := keyed(app, before)
	if err != nil {
		return nil, err
	}
	ak, err := keyed(app, after)
	if err != nil {
		return nil, err
	}
	want := make(map[objKey]*object, len(current))
	for k, o := range current {
		want[k] = o
	}
	var conflicts []string
	for _, k := range unionKeys(bk, ak) {
		b, a, cur := bk[k], ak[k], current[k]
		switch {
		case b != nil && a != nil:
			if equalValues(b.body, a.body) {
				continue
			}
			if cur == nil {
				conflicts = append(conflicts, fmt.Sprintf("%s, which the change modified, is no longer rendered", k))
				continue
			}
			var diffs []difference
			body, _ := undoValue(nil, b.body, a.body, cur.body, &diffs).(map[string]any)
			if len(diffs) > 0 {
				conflicts = append(conflicts, k.String()+": "+strings.Join(describeConflicts(cur, diffs), ", "))
				continue
			}
			cp := *cur
			cp.body = body
			want[k] = &cp
		case a != nil:
			if cur == nil || !equalValues(cur.body, a.body) {
				conflicts = append(conflicts, fmt.Sprintf("%s, which the change added, has been changed or removed since", k))
				continue
			}
			delete(want, k)
		default:
			if cur != nil {
				conflicts = append(conflicts, fmt.Sprintf("%s, which the change removed, is rendered again", k))
				continue
			}
			want[k] = b
		}
	}
	if len(conflicts) > 0 {
		if len(conflicts) > maxReportedDifferences {
			conflicts = append(conflicts[:maxReportedDifferences], fmt.Sprintf("and %d more", len(conflicts)-maxReportedDifferences))
		}
		return nil, &Refusal{Code: CodeNoLongerApplies, App: app.Name, Reason: fmt.Sprintf(
			"application %s: what the change set has been changed since, and reverting would undo that too: %s", app.Name, strings.Join(conflicts, "; "))}
	}
	return want, nil
}

func (e *revertExpectation) extra(_ Application, added map[objKey]*object) []string {
	return unexpectedObjects(added)
}

// undoValue returns cur with the change before → after taken back. Where cur no
// longer holds what the change wrote, it records a difference (want: what the
// change wrote, got: what is there now) and leaves cur as it is. Maps are undone
// key by key; lists item by item when the change kept their items (by name when
// the items are named, by position otherwise), else as a whole.
func undoValue(segs []string, before, after, cur any, out *[]difference) any {
	if equalValues(before, after) {
		return cur
	}
	child := func(s string) []string { return append(append([]string(nil), segs...), s) }
	bm, bIsMap := before.(map[string]any)
	am, aIsMap := after.(map[string]any)
	cm, cIsMap := cur.(map[string]any)
	if bIsMap && aIsMap && cIsMap {
		res := make(map[string]any, len(cm))
		for k, v := range cm {
			res[k] = v
		}
		keys := map[string]bool{}
		for k := range bm {
			keys[k] = true
		}
		for k := range am {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			bv, bok := bm[k]
			av, aok := am[k]
			cv, cok := cm[k]
			switch {
			case bok && aok && cok:
				res[k] = undoValue(child(k), bv, av, cv, out)
			case aok && !(cok && (bok || equalValues(av, cv))):
				*out = append(*out, difference{segs: child(k), want: av, got: valueOrAbsent(cv, cok)})
			case aok:
				delete(res, k) // added by the change, unchanged since
			case cok:
				*out = append(*out, difference{segs: child(k), want: absent{}, got: cv})
			default:
				res[k] = deepCopy(bv) // removed by the change
			}
		}
		return res
	}
	bl, bIsList := before.([]any)
	al, aIsList := after.([]any)
	cl, cIsList := cur.([]any)
	if bIsList && aIsList && cIsList {
		bn, bNamed := namedItems(bl)
		an, aNamed := namedItems(al)
		switch {
		case bNamed && aNamed && strings.Join(bn, "\x00") == strings.Join(an, "\x00"):
			cn, _ := namedItems(cl)
			res := append([]any(nil), cl...)
			for i, n := range bn {
				j := indexOf(cn, n)
				if j < 0 {
					if !equalValues(bl[i], al[i]) {
						*out = append(*out, difference{segs: child("[name=" + n + "]"), want: al[i], got: absent{}})
					}
					continue
				}
				res[j] = undoValue(child("[name="+n+"]"), bl[i], al[i], cl[j], out)
			}
			return res
		case !bNamed && !aNamed && len(bl) == len(al) && len(cl) == len(al):
			res := make([]any, len(cl))
			for i := range cl {
				res[i] = undoValue(child(fmt.Sprintf("[%d]", i)), bl[i], al[i], cl[i], out)
			}
			return res
		}
	}
	if equalValues(cur, after) {
		return deepCopy(before)
	}
	*out = append(*out, difference{segs: clonePath(segs), want: after, got: cur})
	return cur
}

func valueOrAbsent(v any, ok bool) any {
	if !ok {
		return absent{}
	}
	return v
}

func indexOf(names []string, n string) int {
	for i, m := range names {
		if m == n {
			return i
		}
	}
	return -1
}

// describeConflicts turns the places a revert cannot undo into masked lines.
func describeConflicts(o *object, diffs []difference) []string {
	group := groupOf(o.apiVersion)
	var lines []string
	for _, d := range diffs {
		wrote, now := maskValueAt(group, o.kind, d.segs, d.want), maskValueAt(group, o.kind, d.segs, d.got)
		switch {
		case isAbsent(now):
			lines = append(lines, fmt.Sprintf("%s: the change set %s, it has been removed since", d.path(), flowText(wrote)))
		case isAbsent(wrote):
			lines = append(lines, fmt.Sprintf("%s: the change removed it, it is %s now", d.path(), flowText(now)))
		default:
			lines = append(lines, fmt.Sprintf("%s: the change set %s, it is %s now", d.path(), flowText(wrote), flowText(now)))
		}
	}
	return lines
}
