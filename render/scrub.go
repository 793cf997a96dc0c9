package render

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"sigs.k8s.io/kustomize/api/konfig"
)

// Diffs are masked by structure (mask.go, maskfile.go). Free text is another
// matter: kustomize and kyaml quote what they could not read ("invalid literal
// source hunter2, expected key=value", "node contents: …"), and those messages
// become refusal reasons and warnings. So before Plan returns, every secret value
// of every file it read is replaced in its free text as well.

// minScrubbed is the length of the shortest value scrubbed from free text: shorter
// ones ("1", "yes") would blot out ordinary words and say nothing on their own.
const minScrubbed = 4

// scrubber replaces known secret values in text, longest first, so that a value
// holding another is replaced whole.
type scrubber struct {
	values []string
}

func newScrubber(values []string) *scrubber {
	seen := map[string]bool{}
	var out []string
	add := func(v string) {
		if v = strings.TrimSpace(v); len(v) >= minScrubbed && !seen[v] && v != redacted {
			seen[v] = true
			out = append(out, v)
		}
	}
	for _, v := range values {
		add(v)
		// A rendered Secret holds the value base64-encoded, and a message may show
		// a multi-line value one line at a time.
		add(base64.StdEncoding.EncodeToString([]byte(v)))
		if strings.Contains(v, "\n") {
			for _, l := range strings.Split(v, "\n") {
				add(l)
			}
		}
		// A connection string's password may be quoted without the rest of
		// it: as written, and as unescaped (p%40ss is p@ss).
		for _, pw := range urlSecrets(v) {
			add(pw)
			if raw, err := url.PathUnescape(pw); err == nil {
				add(raw)
			}
			if raw, err := url.QueryUnescape(pw); err == nil {
				add(raw)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return &scrubber{values: out}
}

func (s *scrubber) text(t string) string {
	for _, v := range s.values {
		if strings.Contains(t, v) {
			t = strings.ReplaceAll(t, v, redacted)
		}
	}
	return t
}

// result scrubs a Result's free text: warnings, attempts, differences. The diffs
// are masked already, by structure.
func (s *scrubber) result(r *Result) {
	for i := range r.Warnings {
		w := &r.Warnings[i]
		w.Where, w.Message, w.Alternative = s.text(w.Where), s.text(w.Message), s.text(w.Alternative)
	}
	s.verification(&r.Verification)
}

func (s *scrubber) verification(v *Verification) {
	for i := range v.Apps {
		for j, d := range v.Apps[i].Differences {
			v.Apps[i].Differences[j] = s.text(d)
		}
	}
	s.attempts(v.Attempts)
}

func (s *scrubber) attempts(as []Attempt) {
	for i := range as {
		as[i].Reason = s.text(as[i].Reason)
	}
}

// err scrubs an error: a *Refusal in place, any other error behind one whose
// message is scrubbed (errors.Is and errors.As still see the original).
func (s *scrubber) err(err error) error {
	var ref *Refusal
	if errors.As(err, &ref) {
		ref.Reason = s.text(ref.Reason)
		s.attempts(ref.Attempts)
		if err == error(ref) {
			return err
		}
	}
	if msg := s.text(err.Error()); msg != err.Error() {
		return &scrubbedError{msg: msg, err: err}
	}
	return err
}

// scrubbedError is an error whose message no longer shows secret values.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// secretValues lists the secret values of every file the tree has read (what the
// line masks of maskfile.go hide, as parsed) and those apps set themselves.
func (t *tree) secretValues(apps []Application) []string {
	t.mu.Lock()
	files := make(map[string][]byte, len(t.files))
	for p, e := range t.files {
		if e.err == nil {
			files[p] = e.data
		}
	}
	t.mu.Unlock()
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	roles := generatorRoles(paths, func(dir string) [][]byte {
		var out [][]byte
		for _, name := range konfig.RecognizedKustomizationFileNames() {
			if data, ok := files[path.Join(dir, name)]; ok {
				out = append(out, data)
			}
		}
		return out
	})
	noteValuesFiles(roles, paths, appFileRoles(apps, t.key), func(p string) bool {
		_, read := files[p]
		return read || t.stat(p).kind == kindFile
	})
	var values []string
	for p, data := range files {
		// Parsing every file again would cost a monorepo's plan dearly; a manifest
		// holds a value to scrub only in a shape whose words it contains.
		if roles[p] == roleManifest && !mayHoldSecrets(data) {
			continue
		}
		values = append(values, fileSecretValues(data, roles[p])...)
	}
	return append(values, appSecretValues(apps)...)
}

// appSecretValues lists the secret values apps set in their Application rather
// than in a file, as a cluster diff of the Application masks them: its Helm
// values (values or valuesObject) by key, as a values file's; the value of a
// parameter named like a secret, as render passes it to Helm too (whose parse
// error quotes it) and unless it is one word of letters (see scrubbedByKey:
// auth.enabled=true); the private keys of any parameter's value; and its
// inline kustomize patches, as a kustomization's.
func appSecretValues(apps []Application) []string {
	var out []string
	for _, app := range apps {
		out = append(out, fileSecretValues([]byte(app.Helm.Values), roleValues)...)
		for _, p := range app.Helm.Parameters {
			if looksSecret(p.Name) && scrubbedByKey(p.Value) {
				out = append(out, p.Value, cleanSetParameter(p.Value))
			}
			out = append(out, secretTexts(p.Value)...)
		}
		for _, p := range app.Kustomize.Patches {
			if patch, ok := p["patch"].(string); ok {
				out = append(out, yamlSecretValues([]byte(patch), docShape{target: patchEntryTarget(p)})...)
			}
		}
	}
	return out
}

// mayHoldSecrets reports whether a manifest could hold a value maskfile.go masks:
// a Secret or ConfigMap, a generator, a name that looks secret, a private
// key in base64 (in a text, "PRIVATE KEY" makes it hold the word key), or a
// JSON 6902 operation writing a Secret's fields, whose target, not named in
// it, may be a Secret.
func mayHoldSecrets(data []byte) bool {
	if bytes.Contains(data, []byte("Secret")) || bytes.Contains(data, []byte("ConfigMap")) ||
		bytes.Contains(data, []byte("Generator")) || holdsEncodedPrivateKeyWords(data) ||
		holdsPatchOp(data) && mayWriteSecretFields(data) || holdsURLPassword(data) {
		return true
	}
	// Every name secretLookingName or secretKey matches holds one of these
	// words, in any case; looking for the words instead of running the regular
	// expression over megabytes of manifests keeps a plan within its time.
	lower := bytes.ToLower(data)
	for _, w := range secretNameWords {
		if bytes.Contains(lower, []byte(w)) {
			return true
		}
	}
	return false
}

// holdsURLPassword reports whether data may hold a URL that carries a
// password (see credentialURL): a "://" whose authority, up to the next
// slash, quote or space, holds a colon before an "@", or whose query holds a
// credential. Many manifests hold a URL, few one of these.
func holdsURLPassword(data []byte) bool {
	for rest := data; ; {
		i := bytes.Index(rest, []byte("://"))
		if i < 0 {
			return false
		}
		rest = rest[i+3:]
		end := bytes.IndexAny(rest, "/ \t\r\n\"'")
		if end < 0 {
			end = len(rest)
		}
		if at := bytes.LastIndexByte(rest[:end], '@'); at > 0 && bytes.IndexByte(rest[:at], ':') >= 0 {
			return true
		}
		// A credential in the query (?password=x): the URL up to white space
		// or a quote.
		whole := bytes.IndexAny(rest, " \t\r\n\"'")
		if whole < 0 {
			whole = len(rest)
		}
		if bytes.IndexByte(rest[:whole], '?') >= 0 && len(urlSecrets("x://"+string(rest[:whole]))) > 0 {
			return true
		}
	}
}

// patchOpKeys are how YAML and JSON write the key of a JSON 6902 operation's op.
var patchOpKeys = [][]byte{[]byte("op:"), []byte(`"op"`), []byte("'op'")}

// holdsPatchOp reports whether data may hold a JSON 6902 operation: the key
// "op" standing alone, not the end of a longer key (preStop:, loop:), which
// would have every Deployment with a lifecycle hook parsed again.
func holdsPatchOp(data []byte) bool {
	for _, k := range patchOpKeys {
		for rest, at := data, 0; ; {
			i := bytes.Index(rest, k)
			if i < 0 {
				break
			}
			at += i
			if k[0] != 'o' || at == 0 || bytes.IndexByte([]byte(" \t\n{,["), data[at-1]) >= 0 {
				return true
			}
			at += len(k)
			rest = data[at:]
		}
	}
	return false
}

// secretFieldPaths are how a JSON 6902 operation's path may write a Secret's
// values in its data or stringData.
var secretFieldPaths = [][]byte{[]byte("/data"), []byte("stringData")}

// wholeObjectPath matches an operation's path in place of the whole object,
// "" or "/", as YAML and JSON write it: plain, in either quotes, ending its
// line or a flow mapping's entry ({op: replace, path: /, value: ...}).
var wholeObjectPath = regexp.MustCompile(`(?m)path["']?[ \t]*:[ \t]*(""|''|"/"|'/'|/)[ \t]*(?:$|[,}#])`)

// mayWriteSecretFields reports whether data, which holds a JSON 6902
// operation, may write a Secret's values (see secretFieldPaths and
// wholeObjectPath).
func mayWriteSecretFields(data []byte) bool {
	return slices.ContainsFunc(secretFieldPaths, func(p []byte) bool { return bytes.Contains(data, p) }) || wholeObjectPath.Match(data)
}

// secretNameWords are words one of which every secret-looking name contains.
var secretNameWords = []string{"passw", "pwd", "secret", "token", "credential", "auth", "key", "dsn", "connection", "passphrase"}

// fileSecretValues returns the secret values of one file read as role.
func fileSecretValues(data []byte, role sourceRole) []string {
	// A private key block is one whatever the file, as maskFileLines masks it.
	out := privateKeyBlocks(string(data))
	switch role {
	case roleSecretFile:
		return append(out, string(data))
	case roleSecretEnv, roleConfigEnv:
		for _, l := range splitLines(data) {
			body, _ := cutEnding(l)
			if key, value, ok := strings.Cut(body, "="); ok && (role == roleSecretEnv || looksSecret(strings.TrimSpace(key)) || credentialURL(value)) {
				out = append(out, value)
			}
		}
		return out
	}
	return append(out, yamlSecretValues(data, role.shape())...)
}

// yamlSecretValues returns the secret values of a YAML file or string of shape.
func yamlSecretValues(data []byte, shape docShape) []string {
	var out []string
	for _, m := range sensitiveRangesAs(data, len(splitLines(data)), shape) {
		if m.value != "" && (!m.keyed || scrubbedByKey(m.value)) {
			out = append(out, m.value)
		}
		if decoded, ok := decodedData(m.value); ok && m.encoded {
			out = append(out, decoded)
		}
	}
	return out
}

// decodedData is what v, a Secret's data value, decodes to, if it is base64.
func decodedData(v string) (string, bool) {
	raw, err := base64.StdEncoding.DecodeString(v)
	return string(raw), err == nil
}

// scrubbedByKey reports whether a value masked for its key alone is scrubbed
// from free text too: not when it is one word of letters. Such a key's value is
// as often a word that names something (authBackend: kubernetes) as a secret,
// and scrubbing a word blots it out of every message that uses it. A generated
// secret (digits, symbols, base64) is scrubbed; the diffs mask the value either
// way.
func scrubbedByKey(v string) bool {
	return strings.ContainsFunc(v, func(r rune) bool { return !unicode.IsLetter(r) })
}
