package render

import (
	"container/list"
	"errors"
	"sync"
)

// maxRememberedReaches bounds the Application reaches kept across plans: a
// monorepo of a thousand Applications planned at a dozen commits fits.
const maxRememberedReaches = 16384

// rememberedReaches keeps, for the whole process, the reach of each Application
// in each tree a caller identified (Request.TreeID). Proving which apps an edit
// leaves alone needs every app's reach; on an unchanged tree that is the same
// answer every time, and reading it again is most of a monorepo plan's cost.
var rememberedReaches = newReachMemo(maxRememberedReaches)

// reachMemoKey identifies one reach: the tree, and the Application by name and
// source. The name is part of it because a refusal in a reach names its app.
type reachMemoKey struct {
	tree, app, source string
}

// reachMemo is a least-recently-used map from reachMemoKey to the one
// computation of that reach, shared by every plan that asks for it.
type reachMemo struct {
	limit int

	mu      sync.Mutex
	entries map[reachMemoKey]*list.Element
	recent  *list.List // of *reachMemoEntry, most recently used first
}

type reachMemoEntry struct {
	key  reachMemoKey
	call *reachCall
}

func newReachMemo(limit int) *reachMemo {
	return &reachMemo{limit: limit, entries: map[reachMemoKey]*list.Element{}, recent: list.New()}
}

// call returns the computation of key's reach, remembering a new one when there
// is none. The caller computes it through its once.
func (m *reachMemo) call(key reachMemoKey) *reachCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok {
		m.recent.MoveToFront(e)
		return e.Value.(*reachMemoEntry).call
	}
	c := &reachCall{remembered: &key}
	m.entries[key] = m.recent.PushFront(&reachMemoEntry{key: key, call: c})
	for m.recent.Len() > m.limit {
		oldest := m.recent.Back()
		m.recent.Remove(oldest)
		delete(m.entries, oldest.Value.(*reachMemoEntry).key)
	}
	return c
}

// peek returns the computation of key's reach if one is remembered, without
// starting one.
func (m *reachMemo) peek(key reachMemoKey) *reachCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok {
		return e.Value.(*reachMemoEntry).call
	}
	return nil
}

// forget drops key when it still holds c, so that the next plan computes the
// reach again.
func (m *reachMemo) forget(key reachMemoKey, c *reachCall) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok && e.Value.(*reachMemoEntry).call == c {
		m.recent.Remove(e)
		delete(m.entries, key)
	}
}

// rememberable reports whether a reach depends on the tree's content alone. A
// refusal does (a missing base, a remote resource); any other error is a failure
// to read the tree, which may not happen again.
func (r *appReach) rememberable() bool {
	var ref *Refusal
	return r.err == nil || errors.As(r.err, &ref)
}
