package render

import (
	"sync"
	"unsafe"

	"gopkg.in/yaml.v3"
	"sigs.k8s.io/kustomize/api/types"
)

// maxParsedKustomizationBytes bounds the memory the parsed-kustomization memo keeps,
// estimated per entry from the size of the contents it is keyed by.
const maxParsedKustomizationBytes = 16 << 20

// parsedKustomizations memoizes parseKustomizationBytes for the whole process.
// Deciding which Applications an edit leaves alone reads every app's kustomization
// on every plan; in a monorepo those files rarely change between plans, and parsing
// is most of the cost. The memo is keyed by the file's exact content and parsing
// depends on nothing else, so a hit is always the parse of those bytes: paths are
// resolved afterwards, per repository tree.
var parsedKustomizations = newKustomizationMemo(maxParsedKustomizationBytes)

// kustomizationMemo maps kustomization file contents to their parse. When the
// contents it holds reach the limit, it starts over: simple, bounded, and a
// monorepo's kustomizations fit many times over.
type kustomizationMemo struct {
	limit int

	mu      sync.Mutex
	size    int
	entries map[string]parsedKustomization
}

type parsedKustomization struct {
	k   *types.Kustomization
	err error
}

func newKustomizationMemo(limit int) *kustomizationMemo {
	return &kustomizationMemo{limit: limit, entries: map[string]parsedKustomization{}}
}

// parse returns the kustomization in data. The result is shared with every other
// caller given the same bytes: it must not be modified.
func (m *kustomizationMemo) parse(data []byte) (*types.Kustomization, error) {
	m.mu.Lock()
	e, ok := m.entries[string(data)] // no copy: the conversion only serves the lookup
	m.mu.Unlock()
	if ok {
		return e.k, e.err
	}
	k, err := parseKustomizationBytes(data)
	// The contents, the strings parsed out of them, and the struct.
	cost := 2*len(data) + int(unsafe.Sizeof(types.Kustomization{}))
	m.mu.Lock()
	defer m.mu.Unlock()
	if cost > m.limit {
		return k, err
	}
	if m.size+cost > m.limit {
		m.entries = map[string]parsedKustomization{}
		m.size = 0
	}
	if _, ok := m.entries[string(data)]; !ok {
		m.entries[string(data)] = parsedKustomization{k: k, err: err}
		m.size += cost
	}
	return k, err
}

// parseKustomizationBytes parses a kustomization file the way kustomize reads it,
// legacy fields moved to their current form.
func parseKustomizationBytes(data []byte) (*types.Kustomization, error) {
	k := &types.Kustomization{}
	// yaml.v3 straight into the struct: a third of the cost of kustomize's own
	// YAML-to-JSON route.
	if err := yaml.Unmarshal(data, k); err != nil {
		// Kustomize's own decoder is more lenient (duplicate keys, for one).
		k = &types.Kustomization{}
		if err := k.Unmarshal(data); err != nil {
			return nil, err
		}
	}
	k.FixKustomization()
	return k, nil
}
