package yamledit

import (
	"bytes"
	"fmt"

	"gopkg.in/yaml.v3"
)

// RemoveDocument removes document docIndex (counted as Documents counts them) from
// a file of several documents and returns the new bytes. Only whole lines go: the
// document's own lines (the comments between its separator and the next one
// included) and the one "---" separator that joined it to its neighbours; every
// other byte stays. A comment block at the top of the file that a blank line parts
// from the first document is the file's header and stays when that document goes.
//
// A file of one document is refused (ErrUnsupported): removing its only document
// is removing the file, which is the caller's to do. So are files whose document
// boundaries whole lines cannot show (directives, content on a separator line);
// a "..." end marker goes with the document it closes. The result is checked like every
// edit: it parses into the other documents, each meaning exactly what it did.
func RemoveDocument(src []byte, docIndex int) ([]byte, error) {
	t, err := newText(src)
	if err != nil {
		return nil, err
	}
	docs, err := parseDocuments(t.b, -1)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if docIndex < 0 || docIndex >= len(docs) {
		return nil, fmt.Errorf("document %d: file has %d documents: %w", docIndex, len(docs), ErrNotFound)
	}
	if len(docs) == 1 {
		return nil, fmt.Errorf("document %d is the file's only document; remove the file instead: %w", docIndex, ErrUnsupported)
	}
	segs, err := t.segments()
	if err != nil {
		return nil, err
	}
	if len(segs) != len(docs) {
		return nil, fmt.Errorf("the file's %d document separators do not delimit its %d documents: %w", len(segs)-1, len(docs), ErrUnsupported)
	}
	for i, s := range segs {
		if s.content == isEmptyDocument(docs[i]) {
			return nil, fmt.Errorf("document %d (line %d) is not where its separators say: %w", i, docs[i].Line, ErrUnsupported)
		}
	}
	s := segs[docIndex]
	var from, to int
	switch {
	case s.sep >= 0:
		// The separator before it goes with it, so the next document keeps its own.
		from, to = s.sep, s.end
	case segs[docIndex+1].content:
		// The first document, with no separator before it: the one after it goes.
		from, to = s.header, segs[docIndex+1].start
	default:
		// The document after it is empty: without the separator it would vanish.
		from, to = s.header, segs[docIndex+1].sep
	}
	out := make([]byte, 0, len(t.b)-(to-from))
	out = append(append(out, t.b[:from]...), t.b[to:]...)
	if err := checkRemoved(out, docs, docIndex); err != nil {
		return nil, err
	}
	return out, nil
}

// segment is the lines of one document: start..end, after the separator line at
// sep (-1 when none precedes it). header is where the first document's own lines
// start, after the file's header comment.
type segment struct {
	sep, start, end int
	header          int
	content         bool
}

// segments splits the file at its "---" lines. A first stretch of only comments
// and blank lines is no document (yaml reads none there).
func (t *text) segments() ([]segment, error) {
	var segs []segment
	cur := segment{sep: -1, start: t.bom, header: t.bom}
	headerOpen, sawBlank := true, false
	for i, ls := range t.lines {
		if i == 0 {
			ls += t.bom
		}
		if ls >= len(t.b) && i > 0 {
			break
		}
		end := t.contentEnd(ls)
		line := t.b[ls:end]
		switch {
		case isMarker(line, "---"):
			if rest := bytes.TrimSpace(line[3:]); len(rest) > 0 && rest[0] != '#' {
				return nil, fmt.Errorf("line %d: content on a document separator line: %w", i+1, ErrUnsupported)
			}
			cur.end = ls
			segs = append(segs, cur)
			cur = segment{sep: ls, start: t.nextLine(ls), header: t.nextLine(ls)}
			headerOpen = false
			continue
		case isMarker(line, "..."):
			// An end marker closes the document its segment holds: it goes
			// with that document's lines. (YAML lets a document begin after
			// one without a "---"; such a file is not split here, and the
			// count check below refuses it.)
			continue
		case len(line) > 0 && line[0] == '%':
			return nil, fmt.Errorf("line %d: a YAML directive: %w", i+1, ErrUnsupported)
		}
		trimmed := bytes.TrimSpace(line)
		switch {
		case len(trimmed) == 0:
			if headerOpen {
				sawBlank = true
				cur.header = t.nextLine(ls)
			}
		case trimmed[0] == '#':
		default:
			cur.content = true
			if headerOpen && !sawBlank {
				cur.header = cur.start
			}
			headerOpen = false
		}
	}
	cur.end = len(t.b)
	segs = append(segs, cur)
	if !segs[0].content {
		segs = segs[1:]
	}
	return segs, nil
}

// isMarker reports whether a line starts with a document marker at column 0.
func isMarker(line []byte, marker string) bool {
	return bytes.HasPrefix(line, []byte(marker)) && (len(line) == len(marker) || line[len(marker)] == ' ' || line[len(marker)] == '\t')
}

// checkRemoved re-reads the result: the documents other than the removed one, in
// their order, each unchanged.
func checkRemoved(out []byte, before []*yaml.Node, removed int) error {
	docs, err := parseDocuments(out, -1)
	if err != nil {
		return fmt.Errorf("file without document %d does not parse: %v: %w", removed, err, errSelfCheck)
	}
	if len(docs) != len(before)-1 {
		return fmt.Errorf("file without document %d has %d documents instead of %d: %w", removed, len(docs), len(before)-1, errSelfCheck)
	}
	for i, d := range docs {
		j := i
		if i >= removed {
			j++
		}
		want, err := toTree(before[j], aliasBudget)
		if err != nil {
			return fmt.Errorf("document %d: %w", j, err)
		}
		got, err := toTree(d, aliasBudget)
		if err != nil {
			return fmt.Errorf("document %d after the removal: %v: %w", j, err, errSelfCheck)
		}
		if at := diff(want, got, "$"); at != "" {
			return fmt.Errorf("document %d changed at %s when document %d was removed: %w", j, at, removed, errSelfCheck)
		}
	}
	return nil
}
