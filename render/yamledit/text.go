package yamledit

import (
	"bytes"
	"fmt"
	"sort"
	"unicode/utf8"
)

// text is a file's bytes with a line index that agrees with how yaml.v3 counts
// lines and columns (columns count characters, not bytes).
type text struct {
	b     []byte
	lines []int // byte offset where each line starts; lines[0] is line 1
	bom   int   // length of a leading UTF-8 byte order mark
	eol   string
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

func newText(b []byte) (*text, error) {
	if bytes.HasPrefix(b, []byte{0xFE, 0xFF}) || bytes.HasPrefix(b, []byte{0xFF, 0xFE}) {
		return nil, fmt.Errorf("file is UTF-16: %w", ErrUnsupported)
	}
	t := &text{b: b, lines: []int{0}, eol: "\n"}
	if bytes.HasPrefix(b, utf8BOM) {
		t.bom = len(utf8BOM)
	}
	crlf := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\n':
			t.lines = append(t.lines, i+1)
			if i > 0 && b[i-1] == '\r' {
				crlf++
			}
		case '\r':
			// yaml.v3 counts a lone CR as a line break; lines here are split on
			// LF only, so such files would be located wrongly.
			if i+1 >= len(b) || b[i+1] != '\n' {
				return nil, fmt.Errorf("line %d: carriage return without line feed: %w", len(t.lines), ErrUnsupported)
			}
		case 0xC2:
			if i+1 < len(b) && b[i+1] == 0x85 {
				return nil, fmt.Errorf("line %d: NEL line break character: %w", len(t.lines), ErrUnsupported)
			}
		case 0xE2:
			if i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9) {
				return nil, fmt.Errorf("line %d: unicode line or paragraph separator: %w", len(t.lines), ErrUnsupported)
			}
		}
	}
	if crlf > 0 && crlf*2 >= len(t.lines)-1 {
		t.eol = "\r\n"
	}
	return t, nil
}

// offset converts a yaml.v3 position (1-based line, 1-based character column) to a
// byte offset; a column past the end of the line clamps to the line's end.
func (t *text) offset(line, col int) int {
	if line < 1 {
		return 0
	}
	if line > len(t.lines) {
		return len(t.b)
	}
	p := t.lines[line-1]
	if line == 1 {
		p += t.bom
	}
	end := t.contentEnd(p)
	for c := 1; c < col && p < end; c++ {
		_, w := utf8.DecodeRune(t.b[p:])
		p += w
	}
	return p
}

// lineOf returns the 1-based line holding byte offset off.
func (t *text) lineOf(off int) int {
	return sort.Search(len(t.lines), func(i int) bool { return t.lines[i] > off })
}

func (t *text) lineStart(off int) int { return t.lines[t.lineOf(off)-1] }

// contentEnd is the offset where the line holding off ends, before its line break.
func (t *text) contentEnd(off int) int {
	l := t.lineOf(off)
	if l >= len(t.lines) {
		return len(t.b)
	}
	end := t.lines[l] - 1
	if end > 0 && t.b[end-1] == '\r' {
		end--
	}
	return end
}

// nextLine is the offset of the line after the one holding off (len when last).
func (t *text) nextLine(off int) int {
	l := t.lineOf(off)
	if l >= len(t.lines) {
		return len(t.b)
	}
	return t.lines[l]
}

// hasBreak reports whether the line holding off ends with a line break.
func (t *text) hasBreak(off int) bool { return t.lineOf(off) < len(t.lines) }

// eolAt is the line break used by the line holding off, or the file's usual one.
func (t *text) eolAt(off int) string {
	end := t.contentEnd(off)
	if end < len(t.b) {
		if t.b[end] == '\r' {
			return "\r\n"
		}
		return "\n"
	}
	return t.eol
}

// onlySpaceBefore reports whether the line holding off has only spaces and tabs before off.
func (t *text) onlySpaceBefore(off int) bool {
	for p := t.lineStart(off); p < off; p++ {
		if t.b[p] != ' ' && t.b[p] != '\t' {
			return false
		}
	}
	return true
}

// indentAt counts the leading spaces of the line holding off.
func (t *text) indentAt(off int) int {
	p := t.lineStart(off)
	n := 0
	for p+n < len(t.b) && t.b[p+n] == ' ' {
		n++
	}
	return n
}

func isSpaceOrBreak(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// skipBlank moves past spaces, tabs, line breaks and comments.
func (t *text) skipBlank(p int) int {
	for p < len(t.b) {
		switch c := t.b[p]; {
		case isSpaceOrBreak(c):
			p++
		case c == '#' && (p == 0 || isSpaceOrBreak(t.b[p-1])):
			p = t.contentEnd(p)
		default:
			return p
		}
	}
	return p
}
