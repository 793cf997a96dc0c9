package yamledit

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// yaml.v3 nodes carry only where they start. Where they end is found here from
// the bytes: exactly for scalars (by style), and for collections as the end of
// their last member (block) or their closing bracket (flow).

func (t *text) start(n *yaml.Node) int { return t.offset(n.Line, n.Column) }

// errPosition reports bytes that do not match the parsed node; the edit is refused
// rather than guessed.
func errPosition(n *yaml.Node, what string) error {
	return fmt.Errorf("line %d column %d: cannot locate %s in the file: %w", n.Line, n.Column, what, ErrUnsupported)
}

// bounds returns where the node's value text starts (after any anchor and tag) and
// where the node ends. indent is the block indentation of its parent collection
// (-1 at the document root); block scalars need it to find their last line.
func (t *text) bounds(n *yaml.Node, indent int) (valStart, end int, err error) {
	p := t.start(n)
	if n.Kind == aliasNode {
		if p >= len(t.b) || t.b[p] != '*' {
			return 0, 0, errPosition(n, "alias")
		}
		return p, p + 1 + len(n.Value), nil
	}
	propsEnd := p
	for p < len(t.b) && (t.b[p] == '&' || t.b[p] == '!') {
		for p < len(t.b) && !isSpaceOrBreak(t.b[p]) && strings.IndexByte(",[]{}", t.b[p]) < 0 {
			p++
		}
		propsEnd = p
		p = t.skipBlank(p)
	}
	switch n.Kind {
	case scalarNode:
		if n.Value == "" && n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
			// An empty plain scalar has no text; yaml.v3 places it right after
			// the ":" or "-" (block) or at the next token (flow).
			if propsEnd > t.start(n) {
				return propsEnd, propsEnd, nil
			}
			return p, p, nil
		}
		end, err := t.scalarEnd(n, p, indent)
		return p, end, err
	case mappingNode, sequenceNode:
		if n.Style&yaml.FlowStyle != 0 {
			end, err := t.flowEnd(n, p)
			return p, end, err
		}
		if len(n.Content) == 0 {
			return 0, 0, errPosition(n, "empty block collection")
		}
		last := n.Content[len(n.Content)-1]
		childIndent, err := t.childIndent(n)
		if err != nil {
			return 0, 0, err
		}
		_, end, err := t.bounds(last, childIndent)
		return p, end, err
	}
	return 0, 0, errPosition(n, "node")
}

func (t *text) end(n *yaml.Node, indent int) (int, error) {
	_, e, err := t.bounds(n, indent)
	return e, err
}

// childIndent is the indentation yaml.v3 uses for a block collection's children:
// the column of its keys, or of its dashes.
func (t *text) childIndent(n *yaml.Node) (int, error) {
	first := t.start(n.Content[0])
	if n.Kind == mappingNode {
		return t.column(first), nil
	}
	dash, ok := t.dashBefore(first)
	if !ok {
		return 0, errPosition(n, "sequence dash")
	}
	return t.column(dash), nil
}

func (t *text) scalarEnd(n *yaml.Node, p int, indent int) (int, error) {
	b := t.b
	switch {
	case n.Style&yaml.SingleQuotedStyle != 0:
		if p >= len(b) || b[p] != '\'' {
			return 0, errPosition(n, "single-quoted scalar")
		}
		for i := p + 1; i < len(b); i++ {
			if b[i] == '\'' {
				if i+1 < len(b) && b[i+1] == '\'' {
					i++
					continue
				}
				return i + 1, nil
			}
		}
	case n.Style&yaml.DoubleQuotedStyle != 0:
		if p >= len(b) || b[p] != '"' {
			return 0, errPosition(n, "double-quoted scalar")
		}
		for i := p + 1; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1, nil
			}
		}
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		return t.blockScalarEnd(n, p, indent)
	default:
		// A plain scalar cannot hold comments, so its non-space characters are
		// exactly those of its value; multi-line plain scalars fold line breaks.
		want := strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, n.Value)
		i := p
		end := p
		for len(want) > 0 {
			for i < len(b) && isSpaceOrBreak(b[i]) {
				i++
			}
			if i >= len(b) {
				return 0, errPosition(n, "plain scalar")
			}
			r, w := utf8.DecodeRune(b[i:])
			wr, ww := utf8.DecodeRuneInString(want)
			if r != wr {
				return 0, errPosition(n, "plain scalar")
			}
			i += w
			end = i
			want = want[ww:]
		}
		return end, nil
	}
	return 0, errPosition(n, "end of quoted scalar")
}

// blockScalarEnd finds the last line of a literal or folded scalar the way
// yaml.v3 does: content is indented at least as much as its first non-empty line.
func (t *text) blockScalarEnd(n *yaml.Node, p int, indent int) (int, error) {
	b := t.b
	if p >= len(b) || (b[p] != '|' && b[p] != '>') {
		return 0, errPosition(n, "block scalar")
	}
	h := p + 1
	keep, explicit := false, 0
	for h < len(b) && strings.IndexByte("+-0123456789", b[h]) >= 0 {
		switch c := b[h]; {
		case c == '+':
			keep = true
		case c >= '1' && c <= '9':
			explicit = int(c - '0')
		}
		h++
	}
	headerEnd := h
	if !t.hasBreak(p) {
		return headerEnd, nil
	}
	contentIndent := 0
	if explicit > 0 {
		contentIndent = max(indent, 0) + explicit
	}
	end := headerEnd
	for line := t.nextLine(p); line < len(b); line = t.nextLine(line) {
		spaces := 0
		for line+spaces < len(b) && b[line+spaces] == ' ' {
			spaces++
		}
		rest := line + spaces
		blank := rest >= len(b) || b[rest] == '\n' || b[rest] == '\r'
		if contentIndent == 0 {
			if blank {
				if keep {
					end = t.contentEnd(line)
				}
				continue
			}
			contentIndent = max(spaces, indent+1, 1)
		}
		if blank {
			if keep {
				end = t.contentEnd(line)
			}
			continue
		}
		if spaces < contentIndent {
			break
		}
		end = t.contentEnd(line)
	}
	return end, nil
}

// flowEnd finds the closing bracket of a flow collection whose opening bracket is at p.
func (t *text) flowEnd(n *yaml.Node, p int) (int, error) {
	b := t.b
	open, close := byte('{'), byte('}')
	if n.Kind == sequenceNode {
		open, close = '[', ']'
	}
	if p >= len(b) || b[p] != open {
		return 0, errPosition(n, "flow collection")
	}
	q := p + 1
	if len(n.Content) > 0 {
		e, err := t.end(n.Content[len(n.Content)-1], -1)
		if err != nil {
			return 0, err
		}
		q = e
	}
	q = t.skipBlank(q)
	if q < len(b) && b[q] == ',' {
		q = t.skipBlank(q + 1)
	}
	if q >= len(b) || b[q] != close {
		return 0, errPosition(n, "end of flow collection")
	}
	return q + 1, nil
}

// colonAfter finds the ":" that follows a mapping key and returns the offset after it.
func (t *text) colonAfter(key *yaml.Node, indent int) (int, error) {
	_, e, err := t.bounds(key, indent)
	if err != nil {
		return 0, err
	}
	for e < len(t.b) && (t.b[e] == ' ' || t.b[e] == '\t') {
		e++
	}
	if e >= len(t.b) || t.b[e] != ':' {
		return 0, errPosition(key, "':' after key")
	}
	return e + 1, nil
}
