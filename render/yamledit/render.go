package yamledit

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// scalarContext is where a scalar is written, which decides what must be quoted.
type scalarContext int

const (
	inBlock scalarContext = iota
	inFlow
	inJSON
)

// layout is the indentation a document already uses, copied by inserted lines.
type layout struct {
	unit      int // child mapping indentation relative to its key
	seqIndent int // dash column of a sequence relative to its key (0: "key:\n- a")
	itemOff   int // content column of an item relative to its dash ("- name" is 2)
	quote     byte
}

var defaultLayout = layout{unit: 2, seqIndent: 2, itemOff: 2, quote: '"'}

// detectLayout reads indentation and quoting habits from the first examples in a
// document, so new lines look like their neighbours.
func detectLayout(t *text, root *yaml.Node) layout {
	l := defaultLayout
	var unitSeen, seqSeen, itemSeen bool
	single, double := 0, 0
	var visit func(n *yaml.Node, depth int)
	visit = func(n *yaml.Node, depth int) {
		if depth > 200 {
			return
		}
		switch n.Kind {
		case scalarNode:
			switch n.Style {
			case yaml.SingleQuotedStyle:
				single++
			case yaml.DoubleQuotedStyle:
				double++
			}
		case mappingNode:
			if n.Style&yaml.FlowStyle != 0 {
				break
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if v.Style&yaml.FlowStyle == 0 && len(v.Content) > 0 && v.Line > k.Line {
					kc := t.column(t.offset(k.Line, k.Column))
					switch {
					case v.Kind == mappingNode && !unitSeen:
						if d := t.column(t.offset(v.Content[0].Line, v.Content[0].Column)) - kc; d > 0 {
							l.unit, unitSeen = d, true
						}
					case v.Kind == sequenceNode && !seqSeen:
						if dash, ok := t.dashBefore(t.offset(v.Content[0].Line, v.Content[0].Column)); ok {
							if d := t.column(dash) - kc; d >= 0 {
								l.seqIndent, seqSeen = d, true
							}
						}
					}
				}
			}
		case sequenceNode:
			if n.Style&yaml.FlowStyle != 0 || itemSeen {
				break
			}
			for _, item := range n.Content {
				if item.Kind == mappingNode && item.Style&yaml.FlowStyle == 0 && len(item.Content) > 0 {
					start := t.offset(item.Content[0].Line, item.Content[0].Column)
					if dash, ok := t.dashBefore(start); ok && t.lineOf(dash) == t.lineOf(start) {
						l.itemOff, itemSeen = start-dash, true
					}
					break
				}
			}
		}
		for _, c := range n.Content {
			visit(c, depth+1)
		}
	}
	visit(root, 0)
	if single > double {
		l.quote = '\''
	}
	return l
}

// column is the 0-based byte column of off within its line; indentation is spaces,
// so for positions at the start of content it equals the character column.
func (t *text) column(off int) int { return off - t.lineStart(off) }

// dashBefore finds the "-" that introduces the sequence item starting at off.
func (t *text) dashBefore(off int) (int, bool) {
	p := off - 1
	for p >= 0 && isSpaceOrBreak(t.b[p]) {
		p--
	}
	if p >= 0 && t.b[p] == '-' {
		return p, true
	}
	return 0, false
}

func pad(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat(" ", n)
}

// scalarText writes a scalar value. prefer is the style of the scalar being
// replaced: a quoted value stays quoted the same way when the new value allows.
func (l layout) scalarText(v *tree, ctx scalarContext, prefer yaml.Style) (string, error) {
	if v.tag != "!!str" {
		if ctx == inJSON {
			switch {
			case v.tag == "!!null":
				return "null", nil
			case v.tag == "!!float" && (strings.Contains(v.value, "inf") || strings.Contains(v.value, "nan")):
				return "", fmt.Errorf("%s cannot be written in JSON: %w", v.value, ErrUnsupported)
			}
		}
		if v.tag == "!!null" {
			return "null", nil
		}
		return v.value, nil
	}
	s := v.value
	if ctx == inJSON || !singleLinePrintable(s) {
		return doubleQuote(s), nil
	}
	quote := l.quote
	switch prefer {
	case yaml.SingleQuotedStyle:
		quote = '\''
	case yaml.DoubleQuotedStyle:
		quote = '"'
	default:
		if !v.quoted && plainSafe(s, ctx) {
			return s, nil
		}
	}
	if quote == '\'' {
		return "'" + strings.ReplaceAll(s, "'", "''") + "'", nil
	}
	return doubleQuote(s), nil
}

// keyText writes a mapping key.
func (l layout) keyText(k string, ctx scalarContext) (string, error) {
	if len(k) > 1000 {
		return "", fmt.Errorf("key longer than 1000 bytes: %w", ErrUnsupported)
	}
	return l.scalarText(&tree{kind: scalarNode, tag: "!!str", value: k}, ctx, 0)
}

// plainSafe asks yaml.v3 whether s can be written without quotes and still read
// back as the same string (it quotes YAML 1.1 booleans such as "yes" too, which
// Kubernetes' YAML reader would take as bools).
func plainSafe(s string, ctx scalarContext) bool {
	if s == "" || strings.ContainsAny(s, "\n\r\t") {
		return false
	}
	if ctx == inFlow && strings.ContainsAny(s, ",[]{}") {
		return false
	}
	out, err := yaml.Marshal(s)
	if err != nil || string(out) != s+"\n" {
		return false
	}
	if !readsBack("k: "+s, s) {
		return false
	}
	return ctx != inFlow || (readsBack("["+s+"]", s) && readsBack("{k: "+s+"}", s) && readsBack("{"+s+": v}", s))
}

// readsBack reports whether doc holds exactly one plain string scalar equal to
// s besides the key "k" or value "v" around it.
func readsBack(doc, s string) bool {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil || len(n.Content) == 0 {
		return false
	}
	c := n.Content[0]
	if c.Kind == sequenceNode && len(c.Content) == 1 {
		return c.Content[0].Tag == "!!str" && c.Content[0].Value == s
	}
	if c.Kind != mappingNode || len(c.Content) != 2 {
		return false
	}
	k, v := c.Content[0], c.Content[1]
	if k.Value == "k" {
		return v.Tag == "!!str" && v.Value == s
	}
	return k.Tag == "!!str" && k.Value == s && v.Value == "v"
}

// printable is the set of characters yaml.v3 accepts in a file.
func printable(r rune) bool {
	switch {
	case r == 0x09 || r == 0x0A || r == 0x0D:
		return true
	case r >= 0x20 && r <= 0x7E:
		return true
	case r == 0x85:
		return true
	case r >= 0xA0 && r <= 0xD7FF:
		return true
	case r >= 0xE000 && r <= 0xFFFD:
		return r != 0xFEFF
	case r >= 0x10000 && r <= 0x10FFFF:
		return true
	}
	return false
}

// singleLinePrintable reports whether s can be written inside single quotes.
func singleLinePrintable(s string) bool {
	for _, r := range s {
		if r == '\n' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029 || !printable(r) {
			return false
		}
	}
	return true
}

// doubleQuote writes s as a double-quoted scalar using only escapes that JSON and
// YAML share, so the same text is valid in both.
func doubleQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x10000 && (!printable(r) || r == 0x85 || r == 0x2028 || r == 0x2029 || r == utf8.RuneError) {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// literalLines writes s as a literal block scalar: the header and the content
// lines indented by indent. ok is false when s needs quoting instead.
func literalLines(s string, indent int) (header string, lines []string, ok bool) {
	if s == "" || s[0] == ' ' || s[0] == '\n' || strings.ContainsRune(s, '\r') {
		return "", nil, false
	}
	body := strings.TrimRight(s, "\n")
	trailing := len(s) - len(body)
	switch trailing {
	case 0:
		header = "|-"
	case 1:
		header = "|"
	default:
		header = "|+"
	}
	for _, line := range strings.Split(body, "\n") {
		for _, r := range line {
			if r == 0x85 || r == 0x2028 || r == 0x2029 || (!printable(r) && r != '\t') {
				return "", nil, false
			}
		}
		if strings.TrimLeft(line, " \t") == "" && line != "" {
			return "", nil, false
		}
		if line == "" {
			lines = append(lines, "")
			continue
		}
		lines = append(lines, pad(indent)+line)
	}
	for i := 1; i < trailing; i++ {
		lines = append(lines, "")
	}
	return header, lines, true
}

// blockLines writes a value in block style with its first line starting at column
// col. The first line carries no indentation; later lines are fully indented.
func (l layout) blockLines(v *tree, col int) ([]string, error) {
	switch {
	case v.kind == mappingNode && len(v.keys) > 0:
		var lines []string
		for i, k := range v.keys {
			key, err := l.keyText(k, inBlock)
			if err != nil {
				return nil, err
			}
			prefix := pad(col)
			if i == 0 {
				prefix = ""
			}
			child := v.vals[i]
			if !isBlockCollection(child) {
				s, err := l.flatText(child, inBlock)
				if err != nil {
					return nil, fmt.Errorf("value of %s: %w", k, err)
				}
				lines = append(lines, prefix+key+": "+s)
				continue
			}
			childCol := col + l.unit
			if child.kind == sequenceNode {
				childCol = col + l.seqIndent
			}
			sub, err := l.blockLines(child, childCol)
			if err != nil {
				return nil, err
			}
			lines = append(lines, prefix+key+":", pad(childCol)+sub[0])
			lines = append(lines, sub[1:]...)
		}
		return lines, nil
	case v.kind == sequenceNode && len(v.items) > 0:
		var lines []string
		for i, item := range v.items {
			prefix := pad(col)
			if i == 0 {
				prefix = ""
			}
			if !isBlockCollection(item) {
				s, err := l.flatText(item, inBlock)
				if err != nil {
					return nil, fmt.Errorf("item %d: %w", i, err)
				}
				lines = append(lines, prefix+"- "+s)
				continue
			}
			off := l.itemOff
			if item.kind == sequenceNode || off < 2 {
				off = 2
			}
			sub, err := l.blockLines(item, col+off)
			if err != nil {
				return nil, err
			}
			lines = append(lines, prefix+"-"+pad(off-1)+sub[0])
			lines = append(lines, sub[1:]...)
		}
		return lines, nil
	}
	s, err := l.flatText(v, inBlock)
	if err != nil {
		return nil, err
	}
	return []string{s}, nil
}

func isBlockCollection(v *tree) bool {
	return (v.kind == mappingNode && len(v.keys) > 0) || (v.kind == sequenceNode && len(v.items) > 0)
}

// flatText writes a scalar or an empty collection on one line.
func (l layout) flatText(v *tree, ctx scalarContext) (string, error) {
	switch v.kind {
	case mappingNode:
		if len(v.keys) == 0 {
			return "{}", nil
		}
	case sequenceNode:
		if len(v.items) == 0 {
			return "[]", nil
		}
	default:
		return l.scalarText(v, ctx, 0)
	}
	return l.flowText(v, ctx, false, 0)
}

// flowText writes a value in flow style: compact on one line, or (pretty) one
// member per line indented by l.unit from col, as JSON is usually formatted.
func (l layout) flowText(v *tree, ctx scalarContext, pretty bool, col int) (string, error) {
	open, close := "[", "]"
	n := len(v.items)
	if v.kind == mappingNode {
		open, close, n = "{", "}", len(v.keys)
	}
	if v.kind == scalarNode {
		return l.scalarText(v, ctx, 0)
	}
	if n == 0 {
		return open + close, nil
	}
	parts := make([]string, n)
	for i := 0; i < n; i++ {
		var child *tree
		prefix := ""
		if v.kind == mappingNode {
			key, err := l.keyText(v.keys[i], ctx)
			if err != nil {
				return "", err
			}
			prefix, child = key+": ", v.vals[i]
		} else {
			child = v.items[i]
		}
		s, err := l.flowText(child, ctx, pretty, col+l.unit)
		if err != nil {
			return "", err
		}
		parts[i] = prefix + s
	}
	if !pretty {
		return open + strings.Join(parts, ", ") + close, nil
	}
	inner := pad(col + l.unit)
	return open + "\n" + inner + strings.Join(parts, ",\n"+inner) + "\n" + pad(col) + close, nil
}
