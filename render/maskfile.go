package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/types"
)

// A git diff shows lines without the document around them: a hunk of an unrelated
// image change can carry a secretGenerator literal or a Secret's data as context.
// So files are masked from their parse, before diffing: the line ranges that hold
// secret values are found in the whole file, and those lines are replaced on both
// sides of the diff. Line counts never change, so hunks still point at the real
// lines.

// sourceRole says how a kustomize generator reads a file, which decides what of its
// content is secret.
type sourceRole int

const (
	roleManifest    sourceRole = iota // YAML: masked by document shape
	roleKindPatch                     // a patch file kustomizations apply only to kinds none of which is a Secret
	roleValues                        // Helm values: masked by key, whatever keys they hold
	roleSecretPatch                   // a patch file a kustomization applies to a Secret: a JSON 6902 patch's every value
	roleConfigEnv                     // configMapGenerator env file: values of secret-looking keys
	roleSecretEnv                     // secretGenerator env file: every value
	roleSecretFile                    // read whole into a Secret (or a secret-looking ConfigMap key)
)

// maskFileLines splits a file into lines (each keeping its line ending) and replaces
// the secret values in it, as role and its parse say.
func maskFileLines(data []byte, role sourceRole) []string {
	lines := splitLines(data)
	switch role {
	case roleSecretFile:
		for i := range lines {
			lines[i] = redactWhole(lines[i])
		}
		return lines
	case roleSecretEnv, roleConfigEnv:
		for i := range lines {
			lines[i] = redactEnvLine(lines[i], role == roleSecretEnv)
		}
	default:
		lines = maskYAMLLines(data, lines, role.shape())
	}
	if bytes.Contains(data, []byte("PRIVATE KEY")) {
		maskPrivateKeyLines(lines)
	}
	return lines
}

// maskPrivateKeyLines masks every line of each private key block in lines,
// from the line it begins on to the one it ends on (or the last, when it does
// not end), whatever the file: one that is no YAML (a key file, a certificate
// bundle) holds a key as plainly as a value does, and so does a comment. The
// lines of a certificate beside it stay.
func maskPrivateKeyLines(lines []string) {
	in := false
	for i, l := range lines {
		if !in {
			begin := privateKeyBegin.FindStringIndex(l)
			if begin == nil {
				continue
			}
			in = !privateKeyEnd.MatchString(l[begin[1]:])
		} else {
			in = !privateKeyEnd.MatchString(l)
		}
		lines[i] = redactLine(l)
	}
}

// maskYAMLLines replaces the secret values in lines, those of data, a YAML file
// or string of shape.
func maskYAMLLines(data []byte, lines []string, shape docShape) []string {
	for _, m := range sensitiveRangesAs(data, len(lines), shape) {
		for i := m.from; i <= m.to && i <= len(lines); i++ {
			l := lines[i-1]
			if strings.HasPrefix(l, "---") || strings.HasPrefix(l, "...") {
				continue
			}
			if i > m.from && !m.block && strings.HasPrefix(strings.TrimSpace(l), "#") {
				continue // a comment between this value and the next key
			}
			if m.literal && i == m.from {
				lines[i-1] = redactLiteralLine(l)
			} else {
				lines[i-1] = redactLine(l)
			}
		}
	}
	return lines
}

// shape is what a YAML file's role says of it (see docShape).
func (r sourceRole) shape() docShape {
	switch r {
	case roleValues:
		return docShape{values: true}
	case roleSecretPatch:
		return docShape{target: patchTarget{kind: "Secret"}}
	case roleKindPatch:
		return docShape{target: patchTarget{notSecret: true}}
	}
	return docShape{}
}

// splitLines splits after each "\n"; a final line without one is kept as is.
func splitLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	parts := strings.SplitAfter(string(data), "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// cutEnding splits a line into its text and its line ending.
func cutEnding(line string) (string, string) {
	if body, ok := strings.CutSuffix(line, "\r\n"); ok {
		return body, "\r\n"
	}
	if body, ok := strings.CutSuffix(line, "\n"); ok {
		return body, "\n"
	}
	return line, ""
}

var keyPrefix = regexp.MustCompile(`^(\s*(?:-\s+)?(?:"[^"]*"|'[^']*'|[^\s:#][^:#]*?)\s*:)`)

// redactLine keeps a YAML line's key (or its indentation) and replaces the rest.
func redactLine(line string) string {
	body, ending := cutEnding(line)
	if strings.TrimSpace(body) == "" {
		return line
	}
	if m := keyPrefix.FindString(body); m != "" {
		return m + " " + redacted + ending
	}
	return indentOf(body) + redacted + ending
}

// redactLiteralLine masks a generator literal item ("- key=value"), keeping the key.
func redactLiteralLine(line string) string {
	body, ending := cutEnding(line)
	item, ok := strings.CutPrefix(strings.TrimLeft(body, " \t"), "-")
	if !ok {
		return redactLine(line) // a flow sequence: the whole line goes
	}
	item = strings.TrimLeft(item, " \t")
	lead := body[:len(body)-len(item)]
	quote := ""
	if item != "" && (item[0] == '"' || item[0] == '\'') {
		quote, item = item[:1], item[1:]
	}
	key, _, ok := strings.Cut(item, "=")
	if !ok {
		return lead + quote + redacted + quote + ending
	}
	return lead + quote + key + "=" + redacted + quote + ending
}

// redactEnvLine masks one KEY=VALUE line of an env file: every value when all, else
// those of secret-looking keys and URLs that carry a password. Comments and
// blank lines stay.
func redactEnvLine(line string, all bool) string {
	body, ending := cutEnding(line)
	t := strings.TrimSpace(body)
	if t == "" || strings.HasPrefix(t, "#") {
		return line
	}
	key, value, ok := strings.Cut(body, "=")
	if !ok {
		// "KEY" alone takes the value from the environment; it shows no value.
		return line
	}
	if !all && !looksSecret(strings.TrimSpace(key)) && !credentialURL(value) {
		return line
	}
	return key + "=" + redacted + ending
}

func redactWhole(line string) string {
	body, ending := cutEnding(line)
	if strings.TrimSpace(body) == "" {
		return line
	}
	return indentOf(body) + redacted + ending
}

func indentOf(s string) string {
	return s[:len(s)-len(strings.TrimLeft(s, " \t"))]
}

// lineMask is a 1-based, inclusive range of lines holding a secret value.
type lineMask struct {
	from, to int
	// block: the range is a block scalar, whose lines are all content.
	block bool
	// literal: the first line is a generator literal item ("- key=value").
	literal bool
	// value is the secret value as parsed, when it is a scalar: scrubbing free
	// text (see scrub.go) looks for it.
	value string
	// keyed: the value is masked for its key alone (see keyedRanges).
	keyed bool
	// encoded: the value is a Secret's data, base64-encoded; free text may
	// quote what it decodes to as well.
	encoded bool
}

// carrying is a one-line mask at line that carries r's value, for scrubbing,
// where the lines holding it are masked whole already.
func (r lineMask) carrying(line int) lineMask {
	return lineMask{from: line, to: line, block: true, value: r.value, keyed: r.keyed, encoded: r.encoded}
}

// sensitiveRanges finds the line ranges of a YAML file that hold secret values. A
// file that does not parse is masked whole when it looks like it holds any, since
// its structure is unknown.
func sensitiveRanges(data []byte, lineCount int) []lineMask {
	return sensitiveRangesAs(data, lineCount, docShape{})
}

// sensitiveRangesAs is sensitiveRanges for a file whose reader knows more of it
// than its content says (see docShape).
func sensitiveRangesAs(data []byte, lineCount int, shape docShape) []lineMask {
	return rangesWithin(data, lineCount, shape, &resolveBudget{bytes: MaxFileSize})
}

// docShape is what is known of a YAML file or string besides its content.
type docShape struct {
	// values: it is Helm values (a values file an Application or a
	// kustomization's helmCharts names, a values string), masked by key
	// whatever keys it holds: a kind and an apiVersion in it are a chart's
	// settings, not a Kubernetes object's.
	values bool
	// target is what a patch in it patches, when its kustomization or
	// Application says.
	target patchTarget
}

// resolveBudget is what resolving aliases and merge keys may still expand to in
// one file, its inline patches included: the bytes of the scalars read.
type resolveBudget struct{ bytes int }

// rangesWithin is sensitiveRanges, resolving within budget.
func rangesWithin(data []byte, lineCount int, shape docShape, budget *resolveBudget) []lineMask {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if bytes.Contains(data, []byte("Secret")) || bytes.Contains(data, []byte("Generator")) || looksSecret(string(data)) {
				return []lineMask{{from: 1, to: lineCount, block: true}}
			}
			return nil
		}
		docs = append(docs, &n)
	}
	var out []lineMask
	for i, doc := range docs {
		end := lineCount
		if i+1 < len(docs) {
			end = docStartLine(docs[i+1]) - 1
		}
		root := doc
		if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
			root = root.Content[0]
		}
		if sharesValues(root) {
			if whole, values := resolvedMasks(root, shape, budget); whole {
				all := lineMask{from: root.Line, to: max(end, root.Line), block: true}
				out = append(out, all)
				// Scrubbing free text looks for the values as a decoder reads
				// them; the document's first line, masked already, carries them.
				for _, v := range values {
					out = append(out, v.carrying(all.from))
				}
			}
		}
		out = append(out, documentRanges(root, end, shape, budget)...)
		privateKeyRanges(root, end, &out)
		// A document that is one scalar is a key file in base64, or text (a
		// key file, a bundle of a certificate and a key) whose key block
		// maskPrivateKeyLines masks line by line, keeping the certificate's.
		if root.Kind == yaml.ScalarNode && privateKeyBlocks(root.Value) == nil {
			privateKeyRange(root, end, &out)
		}
	}
	return out
}

// privateKeyRanges masks, anywhere below n, a scalar value that is a secret
// by what it is (see holdsSecretText: a private key, a URL that carries a
// password), whatever its key or kind, on every line it spans. Free text is
// scrubbed of the secrets in it (see secretTexts), not of a certificate
// beside them.
func privateKeyRanges(n *yaml.Node, end int, out *[]lineMask) {
	visit := func(val *yaml.Node, to int) {
		if val.Kind != yaml.ScalarNode {
			privateKeyRanges(val, to, out)
			return
		}
		privateKeyRange(val, to, out)
	}
	eachPair(n, end, func(_, val *yaml.Node, to int) { visit(val, to) })
	eachItem(n, end, visit)
}

// privateKeyRange masks scalar val, up to line to, if it is a secret by what
// it is (see privateKeyRanges).
func privateKeyRange(val *yaml.Node, to int, out *[]lineMask) {
	r := valueRange(val, to)
	for i, b := range secretTexts(val.Value) {
		if i > 0 {
			r = r.carrying(r.from)
		}
		r.value = b
		*out = append(*out, r)
	}
}

// resolvedMasks reports whether a document that has an alias or a merge key
// must be masked whole, and the values masked in it, judged by what a decoder
// reads: the document with its aliases and merge keys resolved. Its lines show a key, a kind or an entry's
// name at one place and a decoder finds it at another (an alias's anchor, the
// mapping a merge key brings), so a reading of its lines alone can miss what
// the decoder sees: a Secret whose kind is an alias, a ConfigMap's secret-looking
// key or an env entry's secret-looking name brought in by "<<". So the document
// is masked whole when its resolved form holds anything masked, or names another
// kind or apiVersion than its lines do, or cannot be resolved within the bounds
// render reads repository content by (an alias bomb is not expanded). A Helm
// values file's defaults shared by "<<" hold nothing masked and stay shown.
func resolvedMasks(root *yaml.Node, shape docShape, budget *resolveBudget) (whole bool, values []lineMask) {
	c := nodeCounter{sizes: map[*yaml.Node]nodeSize{}}
	size := c.measure(root)
	if c.cyclic || c.aliased > MaxAliasNodes || c.widest > MaxMappingKeys || size.height > MaxDepth || size.bytes > budget.bytes {
		return true, nil
	}
	budget.bytes -= size.bytes
	v, err := decodeResolved(root)
	if err != nil {
		return true, nil
	}
	resolved := resolvedNode(v)
	masked := documentRanges(resolved, 0, shape, budget)
	for _, r := range masked {
		if r.value != "" {
			values = append(values, r)
		}
	}
	for _, field := range []string{"kind", "apiVersion"} {
		if scalarField(root, field) != scalarField(resolved, field) {
			return true, values
		}
	}
	return len(masked) > 0, values
}

// decodeResolved decodes a document into Go values. The decoder panics on a
// document it parsed, instead of failing, when a merge key brings a key that is
// a mapping or a list into a mapping whose keys are not all strings ("1: one",
// "<<: {x, {y}}"): Go cannot hash it.
// Such a document is an error here, so a file of it is masked whole rather than
// ending whoever reads it.
func decodeResolved(root *yaml.Node) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("decode: %v", r)
		}
	}()
	err = root.Decode(&v)
	return v, err
}

// resolvedNode is v, a document decoded into Go values, as a tree of nodes the
// masking reads: every scalar as its text, without lines.
func resolvedNode(v any) *yaml.Node {
	switch x := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for k, e := range x {
			n.Content = append(n.Content, resolvedNode(k), resolvedNode(e))
		}
		return n
	case map[any]any:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for k, e := range x {
			n.Content = append(n.Content, resolvedNode(k), resolvedNode(e))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range x {
			n.Content = append(n.Content, resolvedNode(e))
		}
		return n
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode}
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: x}
	default:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: fmt.Sprint(x)}
	}
}

// documentRanges masks one document: Secret data, secret-looking ConfigMap keys,
// generator literals, and, anywhere in it, the value of an item named like a secret;
// in a document of no known schema (Helm values, a custom resource) the values of
// secret-looking keys too, as mask.go masks objects; each item of a List as a
// document of its own.
func documentRanges(root *yaml.Node, end int, shape docShape, budget *resolveBudget) []lineMask {
	var out []lineMask
	if jsonPatch(root) {
		out = jsonPatchRanges(root, end, shape.target, budget)
		walkNamedValues(root, end, &out)
		return out
	}
	// A document without both a kind and an apiVersion, as strings, is no
	// Kubernetes object: a Helm values file (whose chart may well read a "kind" of
	// its own), a Chart.yaml, a kustomization. Nor is Helm values that hold both.
	object := !shape.values && stringField(root, "kind") != "" && stringField(root, "apiVersion") != ""
	if !object || !schemaKnown(groupOf(stringField(root, "apiVersion"))) {
		keyedRanges(root, end, object, "", notSecret, budget, &out)
	}
	if root.Kind == yaml.MappingNode {
		kind, apiVersion := scalarField(root, "kind"), scalarField(root, "apiVersion")
		core := !strings.Contains(apiVersion, "/")
		if core && kind == "Secret" && sharesValues(root) || kindUncertain(root) {
			// An alias reads its value from its anchor, which may stand anywhere
			// in the document, and a merge key ("<<") adds its mapping's keys to
			// the mapping it stands in, data and stringData among them: a decoder
			// finds values outside the data and stringData the file shows, so
			// every line is masked. So is a document whose kind is not certain:
			// its kind or apiVersion given twice, or a merge key among them, which
			// decoders read differently.
			return []lineMask{{from: root.Line, to: max(end, root.Line), block: true}}
		}
		eachPair(root, end, func(key, val *yaml.Node, to int) {
			switch {
			case core && kind == "Secret" && (key.Value == "data" || key.Value == "stringData"):
				out = append(out, secretDataRanges(key.Value, val, to)...)
			case key.Value == "metadata":
				out = append(out, annotationRanges(val, to)...)
			case core && kind == "ConfigMap" && (key.Value == "data" || key.Value == "binaryData"):
				out = append(out, encodedIf(key.Value == "binaryData", mapValues(val, to, looksSecret))...)
			case key.Value == "secretGenerator" || key.Value == "configMapGenerator":
				out = append(out, literalRanges(val, key.Value == "secretGenerator")...)
			case key.Value == "patches" || key.Value == "patchesStrategicMerge" || key.Value == "patchesJson6902":
				out = append(out, inlinePatchRanges(val, budget)...)
			case key.Value == "items" && object:
				// Argo CD deploys each item of an items list (a List of any
				// kind) as an object of its own.
				eachItem(val, to, func(it *yaml.Node, ito int) {
					out = append(out, documentRanges(it, ito, shape, budget)...)
				})
			case key.Value == "helmCharts" && object:
				// A kustomization's inline Helm values (one of no kind is
				// masked by key whole already).
				eachItem(val, to, func(chart *yaml.Node, cto int) {
					eachPair(chart, cto, func(k, v *yaml.Node, vto int) {
						if k.Value == "valuesInline" {
							keyedRanges(v, vto, false, "", notSecret, budget, &out)
						}
					})
				})
			}
		})
	}
	walkNamedValues(root, end, &out)
	return out
}

// eachPair calls fn for each key and value of a mapping, with the last line the
// value may span (the line before the next key, or end).
func eachPair(m *yaml.Node, end int, fn func(key, val *yaml.Node, to int)) {
	if m.Kind != yaml.MappingNode {
		return
	}
	for j := 0; j+1 < len(m.Content); j += 2 {
		to := end
		if j+2 < len(m.Content) {
			to = m.Content[j+2].Line - 1
		}
		fn(m.Content[j], m.Content[j+1], to)
	}
}

// valueRange is the range of one value node that ends by to at the latest. A
// section that is not a mapping (a Secret's "data: !!binary …", a flow map) is
// masked whole.
func valueRange(val *yaml.Node, to int) lineMask {
	block := val.Kind == yaml.ScalarNode && (val.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0)
	if val.Kind != yaml.ScalarNode {
		block = true // a nested structure: every line of it is part of the value
	}
	r := lineMask{from: val.Line, to: max(to, val.Line), block: block}
	if val.Kind == yaml.ScalarNode {
		r.value = val.Value
	}
	// An alias's value stands at its anchor, which comes before it in the
	// document: the lines from the earliest anchor the value reads on hold it.
	if from := anchorLine(val, map[*yaml.Node]bool{}); from < r.from {
		r.from, r.block = from, true
	}
	return r
}

// anchorLine is the first line of an anchor n reads a value from through an
// alias, at any depth, or n's own line when it reads none. Each anchor is
// followed once, so a document of aliases of aliases costs its size, not its
// expansion.
func anchorLine(n *yaml.Node, seen map[*yaml.Node]bool) int {
	line := n.Line
	if n.Kind == yaml.AliasNode && n.Alias != nil && !seen[n.Alias] {
		seen[n.Alias] = true
		line = min(line, anchorLine(n.Alias, seen))
	}
	for _, c := range n.Content {
		line = min(line, anchorLine(c, seen))
	}
	return line
}

// secretDataRanges masks every value of a Secret's data or stringData (field),
// m; those of data are base64-encoded.
func secretDataRanges(field string, m *yaml.Node, to int) []lineMask {
	return encodedIf(field == "data", mapValues(m, to, func(string) bool { return true }))
}

// encodedIf marks the values of ms base64-encoded (a Secret's data, a
// ConfigMap's binaryData) when encoded.
func encodedIf(encoded bool, ms []lineMask) []lineMask {
	for i := range ms {
		ms[i].encoded = encoded
	}
	return ms
}

// mapValues masks the values of the keys of m that secret accepts; m not being a
// mapping masks it whole.
func mapValues(m *yaml.Node, to int, secret func(string) bool) []lineMask {
	if m.Kind != yaml.MappingNode {
		if secret("") {
			return []lineMask{valueRange(m, to)}
		}
		return nil
	}
	var out []lineMask
	eachPair(m, to, func(key, val *yaml.Node, vto int) {
		if secret(key.Value) {
			r := valueRange(val, vto)
			r.from = min(r.from, key.Line) // the key's line holds the start of the value
			out = append(out, r)
		}
	})
	return out
}

// literalRanges masks the literals of every generator in a kustomization's
// secretGenerator (all values) or configMapGenerator (secret-looking keys, and
// URLs that carry a password).
func literalRanges(gens *yaml.Node, all bool) []lineMask {
	if gens.Kind != yaml.SequenceNode {
		return nil
	}
	var out []lineMask
	for _, g := range gens.Content {
		if g.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(g.Content); j += 2 {
			if g.Content[j].Value != "literals" {
				continue
			}
			lits := g.Content[j+1]
			if lits.Kind != yaml.SequenceNode {
				continue
			}
			for _, l := range lits.Content {
				key, value, ok := strings.Cut(l.Value, "=")
				if !ok {
					value = l.Value // not a literal kustomize accepts; its error shows it whole
				}
				if all || looksSecret(key) || !ok || credentialURL(value) {
					out = append(out, lineMask{from: l.Line, to: l.Line, literal: lits.Style&yaml.FlowStyle == 0, value: value})
				}
			}
		}
	}
	return out
}

// keyedRanges masks, anywhere below n, the scalar value of a secret-looking key
// (see secretKey), the scalar items of a list under one, every scalar under a
// plural one (under is the secrecy of the key n is the value of), and a Helm
// values string (an Application source's helm.values) by its own content. An
// object's metadata (skipMeta, at its root) is left alone, as mask.go leaves it.
func keyedRanges(n *yaml.Node, end int, skipMeta bool, parent string, under keySecrecy, budget *resolveBudget, out *[]lineMask) {
	inner := notSecret // the secrecy of what is under n, when all of it is masked
	if under.all() {
		inner = groupSecret
	}
	switch n.Kind {
	case yaml.MappingNode:
		var keys []string
		eachPair(n, end, func(key, _ *yaml.Node, _ int) { keys = append(keys, key.Value) })
		eachPair(n, end, func(key, val *yaml.Node, to int) {
			if skipMeta && key.Value == "metadata" {
				return
			}
			if parent == "helm" && key.Value == "values" && val.Kind == yaml.ScalarNode {
				*out = append(*out, embeddedRanges(val, to, docShape{values: true}, budget)...)
				return
			}
			if parent == "kustomize" && key.Value == "patches" {
				// An Application's kustomize patches, read as a kustomization's.
				*out = append(*out, inlinePatchRanges(val, budget)...)
				return
			}
			secret := inner
			if !secret.all() {
				secret = secretKey(key.Value, keys)
			}
			if (inner.all() || secret.scalar()) && maskedNode(val) {
				r := valueRange(val, to)
				r.from = min(r.from, key.Line) // the key's line holds the start of the value
				r.keyed = true
				*out = append(*out, r)
				return
			}
			keyedRanges(val, to, false, key.Value, secret, budget, out)
		})
	case yaml.SequenceNode:
		eachItem(n, end, func(it *yaml.Node, to int) {
			if under.items() && maskedNode(it) {
				r := valueRange(it, to)
				r.keyed = true
				*out = append(*out, r)
				return
			}
			keyedRanges(it, to, false, "", inner, budget, out)
		})
	}
}

// eachItem calls fn for each item of a sequence, with the last line it may span.
func eachItem(seq *yaml.Node, end int, fn func(it *yaml.Node, to int)) {
	if seq.Kind != yaml.SequenceNode {
		return
	}
	for i, it := range seq.Content {
		to := end
		if i+1 < len(seq.Content) {
			to = seq.Content[i+1].Line - 1
		}
		fn(it, to)
	}
}

// maskedNode reports whether a value under a secret-looking key is masked: a
// scalar (or an alias of one) that is not a boolean, a null or empty, which are
// no secrets (see maskedScalar).
func maskedNode(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode || n.Value == "" {
		return false
	}
	tag := n.ShortTag()
	return tag != "!!bool" && tag != "!!null"
}

// embeddedRanges masks YAML written as a string (an inline patch, a Helm values
// string) by its own content, moved to the lines it occupies in the file, up to
// line to. A string that is not a literal block does not keep its lines in the
// file: it is masked whole when it holds any secret.
func embeddedRanges(body *yaml.Node, to int, shape docShape, budget *resolveBudget) []lineMask {
	lines := len(splitLines([]byte(body.Value)))
	inner := rangesWithin([]byte(body.Value), lines, shape, budget)
	if body.Style&yaml.LiteralStyle == 0 {
		if len(inner) == 0 {
			return nil
		}
		whole := lineMask{from: body.Line, to: max(to, body.Line), block: true}
		out := []lineMask{whole}
		// Scrubbing free text looks for the values; the first line carries them.
		for _, r := range inner {
			if r.value != "" {
				out = append(out, r.carrying(whole.from))
			}
		}
		return out
	}
	// A literal block's content starts on the line after its indicator.
	for i := range inner {
		inner[i].from, inner[i].to = inner[i].from+body.Line, inner[i].to+body.Line
	}
	return inner
}

// inlinePatchRanges masks the inline patches of a kustomization or an
// Application (a patch written as a string in it) by their own content, as
// kustomize reads them (a strategic-merge patch, or a JSON 6902 patch of the
// entry's target), moved to the lines they occupy in the file.
func inlinePatchRanges(patches *yaml.Node, budget *resolveBudget) []lineMask {
	if patches.Kind != yaml.SequenceNode {
		return nil
	}
	var out []lineMask
	for _, it := range patches.Content {
		body := it
		var target patchTarget
		if it.Kind == yaml.MappingNode {
			body = nil
			for j := 0; j+1 < len(it.Content); j += 2 {
				switch it.Content[j].Value {
				case "patch":
					body = it.Content[j+1]
				case "target":
					target = patchTargetOf(it.Content[j+1])
				}
			}
		}
		if body == nil || body.Kind != yaml.ScalarNode || body.Value == "" {
			continue
		}
		// A one-line patch (a path of patchesStrategicMerge is no YAML that
		// holds a secret), folded or quoted, is masked whole to as many lines
		// as it has when it holds one.
		out = append(out, embeddedRanges(body, body.Line+len(splitLines([]byte(body.Value)))-1, docShape{target: target}, budget)...)
	}
	return out
}

// walkNamedValues masks, anywhere below n, the "value" of a mapping whose name
// (entryName) looks secret: container env entries, in manifests and in patches
// alike.
func walkNamedValues(n *yaml.Node, end int, out *[]lineMask) {
	switch n.Kind {
	case yaml.MappingNode:
		var keys []string
		for j := 0; j+1 < len(n.Content); j += 2 {
			keys = append(keys, n.Content[j].Value)
		}
		name := entryName(keys, func(k string) string { return scalarField(n, k) })
		eachPair(n, end, func(key, val *yaml.Node, to int) {
			if key.Value == "value" && looksSecret(name) {
				*out = append(*out, valueRange(val, to))
				return
			}
			walkNamedValues(val, to, out)
		})
	case yaml.SequenceNode:
		for i, it := range n.Content {
			to := end
			if i+1 < len(n.Content) {
				to = n.Content[i+1].Line - 1
			}
			walkNamedValues(it, to, out)
		}
	}
}

// annotationRanges masks the last-applied annotation: a copy of the whole object.
func annotationRanges(meta *yaml.Node, end int) []lineMask {
	var out []lineMask
	eachPair(meta, end, func(key, val *yaml.Node, to int) {
		if key.Value == "annotations" {
			out = append(out, mapValues(val, to, func(k string) bool { return k == lastAppliedAnnotation })...)
		}
	})
	return out
}

// kindUncertain reports whether mapping m gives kind or apiVersion more than once,
// or has a merge key while it or what is merged names a kind. A merge key in a
// document of no kind (a Helm values file's defaults) is left alone.
func kindUncertain(m *yaml.Node) bool {
	seen := map[string]bool{}
	for j := 0; j+1 < len(m.Content); j += 2 {
		k := m.Content[j]
		if k.Tag == "!!merge" && (scalarField(m, "kind") != "" || mergedKind(m.Content[j+1])) {
			return true
		}
		if k.Value == "kind" || k.Value == "apiVersion" {
			if seen[k.Value] {
				return true
			}
			seen[k.Value] = true
		}
	}
	return false
}

// mergedKind reports whether the value of a merge key (a mapping, an alias of
// one, or a sequence of them) holds a kind key.
func mergedKind(v *yaml.Node) bool {
	switch {
	case v.Kind == yaml.AliasNode && v.Alias != nil:
		return mergedKind(v.Alias)
	case v.Kind == yaml.SequenceNode:
		return slices.ContainsFunc(v.Content, func(n *yaml.Node) bool { return n.Kind != yaml.SequenceNode && mergedKind(n) })
	case v.Kind == yaml.MappingNode:
		for j := 0; j+1 < len(v.Content); j += 2 {
			if v.Content[j].Value == "kind" {
				return true
			}
		}
	}
	return false
}

// sharesValues reports whether n or a node below it is an alias or a merge key.
func sharesValues(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode || (n.Kind == yaml.ScalarNode && n.Tag == "!!merge") {
		return true
	}
	return slices.ContainsFunc(n.Content, sharesValues)
}

func docStartLine(doc *yaml.Node) int {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		return doc.Content[0].Line
	}
	return doc.Line
}

// stringField is scalarField when the value is a string, else "".
func stringField(m *yaml.Node, key string) string {
	for j := 0; j+1 < len(m.Content); j += 2 {
		if v := m.Content[j+1]; m.Content[j].Value == key && v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" {
			return v.Value
		}
	}
	return ""
}

func scalarField(m *yaml.Node, key string) string {
	for j := 0; j+1 < len(m.Content); j += 2 {
		if m.Content[j].Value == key && m.Content[j+1].Kind == yaml.ScalarNode {
			return m.Content[j+1].Value
		}
	}
	return ""
}

// generatorRoles returns how kustomize generators read each of files (canonical
// paths), from the kustomizations in the files' directories and above (generator
// sources cannot leave their kustomization's root); which are patch files of a
// Secret, and which Helm values files of helmCharts. kusts supplies each
// kustomization's content: the edited one when the edit changes it, so both sides
// of a diff are judged by what names them. Files no generator reads are absent.
func generatorRoles(files []string, kusts func(dir string) [][]byte) map[string]sourceRole {
	want := map[string]bool{}
	dirs := map[string]bool{}
	for _, f := range files {
		want[f] = true
		for d := path.Dir(f); ; d = path.Dir(d) {
			dirs[d] = true
			if d == "." || d == "/" {
				break
			}
		}
	}
	roles := map[string]sourceRole{}
	// kindPatches are the patch files named, each with whether every patch
	// naming it has a target that selects no Secret.
	kindPatches := map[string]bool{}
	note := func(p string, r sourceRole) {
		if want[p] && r > roles[p] {
			roles[p] = r
		}
	}
	for d := range dirs {
		for _, data := range kusts(d) {
			k, err := parsedKustomizations.parse(data)
			if err != nil || k == nil {
				continue
			}
			for _, g := range k.SecretGenerator {
				sourceRoles(d, g.KvPairSources, true, note)
			}
			for _, g := range k.ConfigMapGenerator {
				sourceRoles(d, g.KvPairSources, false, note)
			}
			for _, c := range k.HelmCharts {
				for _, f := range append([]string{c.ValuesFile}, c.AdditionalValuesFiles...) {
					if u, err := url.Parse(f); f != "" && err == nil && u.Scheme == "" {
						note(path.Join(d, f), roleValues)
					}
				}
			}
			for _, p := range append(slices.Clone(k.Patches), k.PatchesJson6902...) {
				if p.Path == "" {
					continue
				}
				f, t := path.Join(d, p.Path), selectorTarget(p.Target)
				if t.coreKind("Secret") {
					note(f, roleSecretPatch)
				}
				known, seen := kindPatches[f]
				kindPatches[f] = (known || !seen) && !t.selectsSecret()
			}
		}
	}
	for f, known := range kindPatches {
		if known {
			note(f, roleKindPatch)
		}
	}
	return roles
}

// selectorTarget is what a kustomize patch's target selects, as far as
// masking cares.
func selectorTarget(s *types.Selector) patchTarget {
	if s == nil {
		return patchTarget{}
	}
	return patchTarget{group: s.Group, kind: s.Kind}
}

// noteValuesFiles marks as Helm values those of files (canonical paths) that
// are: values files of the apps (named, see appFileRoles), or a chart's own
// values files (values.yaml, values-prod.yaml, ci/prod-values.yaml; see
// chartValuesFile) by the Chart.yaml isFile finds, which an Application the
// apps do not hold (another cluster's, one not created yet) may name. Their kind and apiVersion, if they hold both, are the
// chart's settings: they are masked by key all the same. A file an app reads
// whole into a secret-looking value is a secret file.
func noteValuesFiles(roles map[string]sourceRole, files []string, named map[string]sourceRole, isFile func(string) bool) {
	for _, f := range files {
		if r := named[f]; r > roles[f] {
			roles[f] = r
		}
		if roles[f] < roleValues && chartValuesFile(f, isFile) {
			roles[f] = roleValues
		}
	}
}

// chartValuesFile reports whether f is a chart's own values file: one named
// as values files are beside its Chart.yaml, or one of the values files its
// ci directory holds for chart testing (ci/prod-values.yaml, as chart-testing
// names them, or ci/values-prod.yaml), which hold the chart's settings as
// any values file does, a kind and an apiVersion among them at times.
func chartValuesFile(f string, isFile func(string) bool) bool {
	dir, base := path.Dir(f), path.Base(f)
	if chartValuesName(base) && isFile(path.Join(dir, "Chart.yaml")) {
		return true
	}
	return path.Base(dir) == "ci" && (chartValuesName(base) || ciValuesName(base)) && isFile(path.Join(path.Dir(dir), "Chart.yaml"))
}

// ciValuesName reports whether a file is named as chart-testing's values
// files are: <something>-values.yaml (.yml).
func ciValuesName(base string) bool {
	stem, ok := strings.CutSuffix(base, ".yaml")
	if !ok {
		stem, ok = strings.CutSuffix(base, ".yml")
	}
	return ok && strings.HasSuffix(stem, "-values") && stem != "-values"
}

// chartValuesName reports whether a file beside a Chart.yaml is named as a
// chart's values files are: values.yaml, or values-<something>.yaml (.yml).
func chartValuesName(base string) bool {
	stem, ok := strings.CutSuffix(base, ".yaml")
	if !ok {
		stem, ok = strings.CutSuffix(base, ".yml")
	}
	return ok && (stem == "values" || strings.HasPrefix(stem, "values-") || strings.HasPrefix(stem, "values."))
}

// appFileRoles are the roles of the files apps' Helm options read, as key names
// them canonically: the values files (spec.source.helm.valueFiles) are values,
// and the file of a parameter named like a secret (fileParameters tls.key) is
// read whole into it, as a secretGenerator's file is.
func appFileRoles(apps []Application, key func(string) string) map[string]sourceRole {
	out := map[string]sourceRole{}
	note := func(app Application, f string, r sourceRole) {
		if p, err := resolveHelmPath(app.Path, f); err == nil && r > out[key(p)] {
			out[key(p)] = r
		}
	}
	for _, app := range apps {
		for _, f := range app.Helm.ValueFiles {
			note(app, f, roleValues)
		}
		for _, p := range app.Helm.FileParameters {
			if looksSecret(p.Name) {
				note(app, p.Path, roleSecretFile)
			}
		}
	}
	return out
}

func sourceRoles(dir string, s types.KvPairSources, secret bool, note func(string, sourceRole)) {
	env := roleConfigEnv
	if secret {
		env = roleSecretEnv
	}
	for _, e := range envFiles(dir, s) {
		note(e, env)
	}
	for _, f := range s.FileSources {
		key, p, ok := strings.Cut(f, "=")
		if !ok {
			key, p = path.Base(f), f
		}
		if secret || looksSecret(key) {
			note(path.Join(dir, p), roleSecretFile)
		}
	}
}

// patchTarget is what a kustomize patch entry's target selects, as far as
// masking cares: its group and kind (none when it does not say), or, for a
// patch file several targets may share, only that none of them is a Secret.
type patchTarget struct {
	group, kind string
	// notSecret: the target's kind is not known here, but is no Secret.
	notSecret bool
}

// patchTargetOf reads a patch entry's target.
func patchTargetOf(n *yaml.Node) patchTarget {
	if n == nil || n.Kind != yaml.MappingNode {
		return patchTarget{}
	}
	return patchTarget{group: scalarField(n, "group"), kind: scalarField(n, "kind")}
}

// coreKind reports whether the target is the core kind named.
func (t patchTarget) coreKind(kind string) bool { return t.group == "" && t.kind == kind }

// selectsSecret reports whether the target may select a Secret. kustomize
// reads a target's group and kind as regular expressions matched whole
// ("Secret|ConfigMap", ".*"), and one left out selects every kind: a target
// by name or label alone (target: {name: db}) may well be a Secret. A pattern
// that does not compile counts as one that may: the file still holds the
// values it would set.
func (t patchTarget) selectsSecret() bool {
	return !t.notSecret && patternMatches(t.group, "") && patternMatches(t.kind, "Secret")
}

// patternMatches reports whether pattern, a kustomize selector's field,
// matches s as kustomize matches it: whole, and any s when it is empty.
func patternMatches(pattern, s string) bool {
	if pattern == "" || pattern == s {
		return true
	}
	re, err := selectorPattern(pattern)
	return err != nil || re.MatchString(s)
}

// builtIn reports whether the target is a built-in kind, whose fields are not
// masked by key (see secretKey): by its group, or, when it gives none (target:
// {kind: Deployment}), by its kind being one of Kubernetes' own.
func (t patchTarget) builtIn() bool {
	switch {
	case t.kind == "":
		return false
	case t.group != "":
		return schemaKnown(t.group)
	}
	return builtInKinds()[t.kind]
}

// builtInKinds are the kinds of the groups whose schema Kubernetes defines.
var builtInKinds = sync.OnceValue(func() map[string]bool {
	out := map[string]bool{}
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if schemaKnown(gvk.Group) && !strings.HasSuffix(gvk.Kind, "List") && !strings.HasSuffix(gvk.Kind, "Options") {
			out[gvk.Kind] = true
		}
	}
	return out
})

// jsonPatch reports whether a document is a JSON 6902 patch, as kustomize tells
// one from a strategic-merge patch: a list of operations, each a mapping with an
// op and a path. The path may be empty: "" is the whole object (RFC 6901), and
// an operation there replaces it.
func jsonPatch(root *yaml.Node) bool {
	if root.Kind != yaml.SequenceNode || len(root.Content) == 0 {
		return false
	}
	for _, op := range root.Content {
		if op.Kind != yaml.MappingNode || scalarField(op, "op") == "" || !hasScalarField(op, "path") {
			return false
		}
	}
	return true
}

// hasScalarField reports whether mapping m has key with a scalar value, which
// may be empty.
func hasScalarField(m *yaml.Node, key string) bool {
	for j := 0; j+1 < len(m.Content); j += 2 {
		if m.Content[j].Value == key && m.Content[j+1].Kind == yaml.ScalarNode {
			return true
		}
	}
	return false
}

// wholeObjectPointer reports whether the JSON pointer p of an operation names
// its target's whole object rather than a field of it: "" does, and the JSON
// patch library kustomize applies puts the value in the object's place; "/"
// (strictly a key named "" at the root) is taken for the same, as an author
// writing it means it.
func wholeObjectPointer(p string) bool { return p == "" || p == "/" }

// wholeObjectRanges masks val, the object a JSON 6902 operation (key, its
// "value") puts in place of its target's whole, as that object's own file
// would be masked, by the kind it names. Of a Secret, every field but its
// kind, apiVersion and metadata is masked, as any other operation of a
// Secret's masks what it sets; when the target's kind is not known, and val
// names none or a Secret's, the target may be a Secret and the values of
// val's data and stringData are masked too. The values of data and stringData
// are kept for scrubbing free text, as the Secret's own file gives them.
func wholeObjectRanges(key, val *yaml.Node, to int, target patchTarget, budget *resolveBudget) []lineMask {
	if target.coreKind("Secret") {
		return wholeSecretRanges(key, val, to)
	}
	out := documentRanges(val, to, docShape{}, budget)
	if kind := scalarField(val, "kind"); target.selectsSecret() && (kind == "" || kind == "Secret") {
		out = append(out, secretFieldRanges(val, to, kind == "")...)
	}
	return out
}

// wholeSecretRanges masks val, a whole Secret an operation (key, its "value")
// sets: every field but its kind, apiVersion and metadata (whose last-applied
// annotation is masked as a Secret's own file masks it); val masked whole when
// it is no mapping.
func wholeSecretRanges(key, val *yaml.Node, to int) []lineMask {
	if val.Kind != yaml.MappingNode {
		r := valueRange(val, to)
		r.from = min(r.from, key.Line)
		return []lineMask{r}
	}
	var out []lineMask
	eachPair(val, to, func(k, v *yaml.Node, vto int) {
		switch k.Value {
		case "kind", "apiVersion":
		case "metadata":
			out = append(out, annotationRanges(v, vto)...)
		default:
			r := valueRange(v, vto)
			r.from = min(r.from, k.Line)
			out = append(out, r)
		}
	})
	return append(out, secretFieldRanges(val, to, false)...)
}

// secretFieldRanges masks the values of obj's data and stringData, as a
// Secret's; those of its data on a guess (see secretOpRanges) when guess.
func secretFieldRanges(obj *yaml.Node, to int, guess bool) []lineMask {
	var out []lineMask
	eachPair(obj, to, func(key, val *yaml.Node, vto int) {
		if secretField(key.Value) {
			out = append(out, guessedData(secretDataRanges(key.Value, val, vto), guess && key.Value == "data")...)
		}
	})
	return out
}

// jsonPatchRanges masks the values of a JSON 6902 patch of target as the
// object's own file would be masked at their path: every value of a Secret
// (its metadata aside), a secret-looking ConfigMap key's, the last-applied
// annotation; and, but in a built-in kind, by key: by the path's last segment
// (spec/auth/password), a list item by the segment before it
// (spec/apiKeys/0), anything under a plural one (spec/secrets/STRIPE), and the
// secret-looking keys inside a value that is a mapping. A target that may be
// a Secret (no kind, a pattern of kinds; a patch file no kustomization names)
// has the data and stringData it writes masked as a Secret's, and the rest by
// key. A value in place of the whole object is masked as that object (see
// wholeObjectRanges).
func jsonPatchRanges(ops *yaml.Node, end int, target patchTarget, budget *resolveBudget) []lineMask {
	var out []lineMask
	eachItem(ops, end, func(op *yaml.Node, oto int) {
		at := scalarField(op, "path")
		segs := jsonPointer(at)
		eachPair(op, oto, func(key, val *yaml.Node, to int) {
			if key.Value != "value" {
				return
			}
			if wholeObjectPointer(at) {
				out = append(out, wholeObjectRanges(key, val, to, target, budget)...)
				return
			}
			if len(segs) == 0 {
				return
			}
			mask := func(keyed bool) *lineMask {
				r := valueRange(val, to)
				r.from, r.keyed = min(r.from, key.Line), keyed
				out = append(out, r)
				return &out[len(out)-1]
			}
			switch {
			case segs[0] == "metadata":
				if len(segs) >= 3 && segs[1] == "annotations" && segs[2] == lastAppliedAnnotation {
					mask(false)
				}
			case target.coreKind("Secret") || target.selectsSecret() && secretField(segs[0]):
				// A target that may be a Secret, by a pattern or by name alone,
				// is taken for one where it writes a Secret's fields: masked, a
				// ConfigMap's data is still shown by the cluster diff of the
				// render, which knows the kind; shown, a Secret's would be
				// shown wherever the file is.
				out = append(out, secretOpRanges(segs, key, val, to, !target.coreKind("Secret"))...)
			case target.coreKind("ConfigMap"):
				if segs[0] != "data" && segs[0] != "binaryData" {
					return
				}
				if len(segs) == 1 {
					out = append(out, encodedIf(segs[0] == "binaryData", mapValues(val, to, looksSecret))...)
				} else if looksSecret(segs[1]) {
					mask(false).encoded = segs[0] == "binaryData"
				}
			case target.builtIn():
				if envValueByIndex(segs) {
					// The patch does not name the variable (its name is in the
					// target's render, not here), so its value may be a secret's:
					// the cluster diff, which has the name, shows a change of an
					// ordinary one.
					mask(false)
				}
			default:
				keyedPointerRanges(segs, key, val, to, budget, &out)
			}
		})
	})
	return out
}

// secretField reports whether a Secret's top-level field holds its values.
func secretField(name string) bool { return name == "data" || name == "stringData" }

// secretOpRanges masks val, the value an operation (key, its "value") sets at
// segs of a Secret, whole, and, of a whole data or stringData, each value for
// scrubbing, as the Secret's own file gives them. guess: the target may be no
// Secret, and what it sets in data is scrubbed from free text as a value
// masked for its key is (see scrubbedByKey), so a ConfigMap's "debug" stays
// readable there; stringData is a Secret's alone.
func secretOpRanges(segs []string, key, val *yaml.Node, to int, guess bool) []lineMask {
	r := valueRange(val, to)
	r.from, r.encoded = min(r.from, key.Line), segs[0] == "data"
	out := []lineMask{r}
	if len(segs) == 1 && secretField(segs[0]) && val.Kind == yaml.MappingNode {
		out = append(out, secretDataRanges(segs[0], val, to)...)
	}
	return guessedData(out, guess && segs[0] == "data")
}

// guessedData marks ms as masked on a guess (see secretOpRanges), when guess.
func guessedData(ms []lineMask, guess bool) []lineMask {
	for i := range ms {
		ms[i].keyed = ms[i].keyed || guess
	}
	return ms
}

// envValueByIndex reports whether the JSON pointer segs names the value of a
// container's environment variable by its index (.../env/1/value).
func envValueByIndex(segs []string) bool {
	n := len(segs)
	return n >= 3 && segs[n-1] == "value" && pointerIndex(segs[n-2]) && segs[n-3] == "env"
}

// keyedPointerRanges masks val, the value a JSON 6902 operation puts at the
// path segs, by key, as keyedRanges masks it in the object itself.
func keyedPointerRanges(segs []string, key, val *yaml.Node, to int, budget *resolveBudget, out *[]lineMask) {
	n := len(segs)
	for _, seg := range segs[:n-1] {
		if !pointerIndex(seg) && secretKey(seg, nil).all() {
			// Under secrets, credentials: every scalar, the value itself too.
			keyedRanges(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{key, val}}, to, false, "", groupSecret, budget, out)
			return
		}
	}
	last := segs[n-1]
	if pointerIndex(last) {
		// An item of a list under the segment before.
		if n >= 2 && secretKey(segs[n-2], nil).items() && maskedNode(val) {
			r := valueRange(val, to)
			r.from, r.keyed = min(r.from, key.Line), true
			*out = append(*out, r)
			return
		}
		last = ""
	}
	// The value as that of its own key, in the mapping of the segment before:
	// keyedRanges masks it, or what in it is secret (a values string under
	// helm, too).
	parent := ""
	if n >= 2 {
		parent = segs[n-2]
	}
	if last == "key" && pointerIndex(parent) {
		// The key of a list's item (a taint's, a toleration's, a selector
		// expression's) names one; an item of a secret-named list is masked above.
		return
	}
	as := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: last, Line: key.Line}, val}}
	keyedRanges(as, to, false, parent, notSecret, budget, out)
}

// jsonPointer splits a JSON pointer (/spec/auth/password) into its segments,
// unescaped.
func jsonPointer(p string) []string {
	p, ok := strings.CutPrefix(p, "/")
	if !ok {
		return nil
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return segs
}

// pointerIndex reports whether a JSON pointer segment is a list index ("0", or
// "-" for after the last item).
func pointerIndex(seg string) bool {
	return seg == "-" || seg != "" && strings.Trim(seg, "0123456789") == ""
}
