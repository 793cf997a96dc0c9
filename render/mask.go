package render

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Masking happens here and in maskfile.go, and nowhere else: every text render
// returns (git diff, cluster diff, field changes, differences in refusals) is built
// from masked input, so no caller has to mask again and no output can forget to.
// Objects are masked by structure; files by line, from their parse (maskfile.go).

// redacted replaces every secret value render would otherwise show. Keys stay, so
// a reader still sees what is there and where a change is.
const redacted = "[redacted]"

// secretLookingName matches the names of keys and environment variables whose
// values are treated as secrets: ConfigMap keys, generator literals and env file
// entries, container env entries. A bare "key" counts only as a word of its own
// (tls.key, SIGNING_KEY, privateKey), not inside another word (MONKEY_MODE).
var secretLookingName = regexp.MustCompile(`(?i)(passw(or)?d|pwd|secret|token|credential|auth|` +
	`api[-_.]?key|private[-_.]?key|access[-_.]?key|dsn|connection[-_.]?string|` +
	`(^|[^a-z])key([^a-z]|$)|(?-i:[a-z]Key)$)`)

// looksSecret reports whether a key or variable name suggests a secret value.
func looksSecret(name string) bool {
	return secretLookingName.MatchString(name)
}

// A private key is a secret by what it is, wherever it is written: under a key
// that does not look secret (a ConfigMap's server.pem, Helm values' tls.pem, a
// file parameter's file), in an env value, in a file of no YAML, in base64. So
// a value holding a PEM private key block is masked whatever its key, and the
// block is scrubbed from free text. A certificate or a public key is no secret, and a
// reviewer needs to see one change: it stays shown.
var (
	privateKeyBegin = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----`)
	privateKeyEnd   = regexp.MustCompile(`-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----`)
	// privateKeyBlock is one block, to its end or, cut short, to the end of
	// the text: what of a value free text is scrubbed of.
	privateKeyBlock = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?s:.*?)(-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\z)`)
)

// holdsSecretText reports whether v is a string that is a secret by what it
// is (see secretTexts): one that holds a PEM private key block, as text or in
// base64, or a URL that carries a password.
func holdsSecretText(v any) bool {
	s, ok := v.(string)
	return ok && len(secretTexts(s)) > 0
}

// secretTexts are what free text is scrubbed of for the secrets s holds by
// what it is, whatever key holds it: its private keys (see privateKeyTexts),
// or s itself when it is a URL that carries a password (the scrubber scrubs
// the password alone too).
func secretTexts(s string) []string {
	if credentialURL(s) {
		return []string{s}
	}
	return privateKeyTexts(s)
}

// credentialURL reports whether s is a URL that carries a password
// (postgres://app:hunter2@db:5432/app, https://deploy:ghp_x@github.com/acme/x,
// redis://:pw@redis:6379), or one in its query (?password=x, see
// credentialParam): a credential, under a key that does not look secret
// (DATABASE_URL, a values file's url, repoURL) as much as under one. A URL
// with a user alone, or whose password is only a reference to one set
// elsewhere ($(DB_PASSWORD), ${DB_PASSWORD}, {{ .Values.db.password }}), is
// shown: it holds none.
func credentialURL(s string) bool {
	return len(urlSecrets(s)) > 0
}

// urlSecrets are the secrets URL s carries, as written: its password (see
// urlPassword), and the values of query parameters that are credentials
// (jdbc:postgresql://db/app?user=app&password=x, an access_token, a signed
// URL's sig), references to them set elsewhere left out.
func urlSecrets(s string) []string {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") || strings.ContainsAny(s, " \t\n") {
		return nil
	}
	var out []string
	if pw, ok := urlPassword(s); ok && pw != "" && !passwordReference(pw) {
		out = append(out, pw)
	}
	_, query, ok := strings.Cut(s, "?")
	if !ok {
		return out
	}
	query, _, _ = strings.Cut(query, "#")
	for _, param := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		name, value, ok := strings.Cut(param, "=")
		if ok && value != "" && credentialParam.MatchString(name) && !passwordReference(value) {
			out = append(out, value)
		}
	}
	return out
}

// credentialParam names the query parameters of a URL that carry a
// credential. It is narrower than looksSecret: a connection string's
// authSource=admin, sslkey=/certs/client.key or tokenType=jwt says where or
// how, not what.
var credentialParam = regexp.MustCompile(`(?i)^(password|passwd|pwd|pass|secret|client_secret|token|access_token|auth_token|refresh_token|api[-_]?key|sig|signature|x-amz-signature)$`)

// urlPassword is the password URL s carries, as written, read as a database
// driver or a client reads it: after the scheme, up to the last "@" before
// the path. net/url is not asked: it refuses a password a driver takes
// unescaped (s3cr^t, p{w}) or a host as a DSN writes it (tcp(db:3306)), and
// reads one holding "#" or "?" as a host and port (postgres://app:12#x@db).
func urlPassword(s string) (string, bool) {
	scheme, rest, ok := strings.Cut(s, "://")
	// jdbc:postgresql://…: a JDBC URL's scheme is "jdbc:" and the driver's.
	if !ok || !urlScheme(strings.TrimPrefix(scheme, "jdbc:")) {
		return "", false
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return "", false
	}
	_, pw, ok := strings.Cut(rest[:at], ":")
	return pw, ok
}

// urlScheme reports whether s is a URL's scheme: a letter, then letters,
// digits, "+", "-" and ".".
func urlScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// passwordReference reports whether a URL's password is only a reference to
// one: a container's $(VAR), a shell's or a template's ${VAR}, a Helm
// template's {{ ... }}.
func passwordReference(pw string) bool {
	return strings.HasPrefix(pw, "$(") && strings.HasSuffix(pw, ")") ||
		strings.HasPrefix(pw, "${") && strings.HasSuffix(pw, "}") ||
		strings.HasPrefix(pw, "{{") && strings.HasSuffix(pw, "}}")
}

// privateKeyTexts are what free text is scrubbed of for the private keys s
// holds: each block in it, or, when s is one written in base64 (a kubeconfig's
// client-key-data, a ConfigMap's binaryData), s itself and each block it
// decodes to, wherever in it the block starts: openssl's export of a key
// writes "Bag Attributes" lines before it. A text that holds none has none.
func privateKeyTexts(s string) []string {
	if blocks := privateKeyBlocks(s); len(blocks) > 0 {
		return blocks
	}
	if len(s) < minEncodedPrivateKey || !onlyBase64(s) {
		return nil
	}
	raw, ok := decodedBase64(strings.Join(strings.Fields(s), ""))
	if !ok {
		return nil
	}
	if blocks := privateKeyBlocks(string(raw)); len(blocks) > 0 {
		return append(blocks, s)
	}
	return nil
}

// decodedBase64 is what s decodes to in base64 as any of its encodings
// writes it: standard, URL-safe (- and _ for + and /), each padded or not. A
// key file or a values string is not always written by a tool that pads
// (base64url, a JWK's tooling, a "tr -d =" in a script), and Helm or an
// application reading it may accept any of them.
func decodedBase64(s string) ([]byte, bool) {
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if !strings.HasSuffix(s, "=") && len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	raw, err := enc.DecodeString(s)
	return raw, err == nil
}

// encodedPrivateKeyWords are how base64 writes "PRIVATE KEY" at each of the
// three places it can start in a group of three bytes.
var encodedPrivateKeyWords = [][]byte{[]byte("UFJJVkFURSBLRV"), []byte("BSSVZBVEUgS0VZ"), []byte("QUklWQVRFIEtFW")}

// holdsEncodedPrivateKeyWords reports whether data may hold a private key in
// base64, by the words of its BEGIN and END lines: a line break wrapping the
// base64 may split one of them, and seldom both.
func holdsEncodedPrivateKeyWords(data []byte) bool {
	for _, w := range encodedPrivateKeyWords {
		if bytes.Contains(data, w) {
			return true
		}
	}
	return false
}

// minEncodedPrivateKey is the length of base64 too short to hold a private
// key block: its BEGIN and END lines alone take more. Shorter values (a
// binaryData flag, a word) are not decoded at all.
const minEncodedPrivateKey = 64

// onlyBase64 reports whether s holds nothing but base64's alphabets (the
// standard one and the URL-safe one) and the white space that wraps its
// lines: a value worth decoding. Checking first
// keeps every long text of a file from being copied to be decoded.
func onlyBase64(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '+', c == '/', c == '=',
			c == '-', c == '_', c == ' ', c == '\t', c == '\n', c == '\r':
		default:
			return false
		}
	}
	return true
}

// privateKeyBlocks are the private key blocks in s.
func privateKeyBlocks(s string) []string {
	if !strings.Contains(s, "PRIVATE KEY") {
		return nil
	}
	return privateKeyBlock.FindAllString(s, -1)
}

// privateKeyAt reports whether scalar v, at path in an object of group, is
// masked for what it is (see holdsSecretText): a private key it holds, a URL
// that carries a password. Text masked by its own content (a Helm
// values string, an inline patch) is masked line by line instead, as its file
// would be.
func privateKeyAt(group string, path []string, v any) bool {
	return holdsSecretText(v) && !helmValuesAt(group, path) && !kustomizePatchAt(group, path)
}

const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// Values of no known schema (a Helm values file, an Application's valuesObject and
// values string, a custom resource's fields) hold secrets wherever their author put
// them: under a key named like one (db.password, apiKey, auth.token). So there the
// scalar value of a secret-looking key is masked, and the items of a list under
// one. Built-in kinds are not masked by key: their schema keeps secrets in Secrets
// (and env values, masked by name), and their secret-looking keys name a secret
// instead (secretName, a selector's key, topologyKey), which a change may edit.

// keySecrecy says what of a key's value is masked for the key alone.
type keySecrecy uint8

const (
	notSecret    keySecrecy = iota
	scalarSecret            // auth, authorization: a scalar value only
	valueSecret             // password, apiKey: a scalar value, or the scalar items of a list
	groupSecret             // secrets, tokens: every scalar anywhere under it, not a scalar value itself (maxTokens: 4096)
	everySecret             // credentials: a scalar value and every scalar under it
)

// scalar reports whether a scalar value of the key is masked.
func (s keySecrecy) scalar() bool {
	return s == scalarSecret || s == valueSecret || s == everySecret
}

// items reports whether the scalar items of a list under the key are masked.
func (s keySecrecy) items() bool { return s >= valueSecret }

// all reports whether every scalar anywhere under the key is masked.
func (s keySecrecy) all() bool { return s >= groupSecret }

// secretKey reports what of the value of key, in a mapping with the keys
// siblings (nil when they are not known), holds a secret, by the key's words
// (see keyWords): its last word names a secret (dbPassword, clientSecret,
// authToken, db.password, API_KEY, privateKey), not merely holds one inside
// another word (tokenizer, author) or goes on past it (tokenTTL,
// passwordMinLength, passwordSecretRef, secretName, tokenFile). "key" counts
// alone or after a word that makes it one (apiKey, signing_key, tls.key), but
// not a selector's or a key selector's "key" (known by the keys beside it; where
// they are not known, a bare "key" counts). "auth" and "authorization" count for
// a scalar only (auth: {enabled: true} is a group of settings). A plural
// (secrets, credentials, passwords, tokens, apiKeys) holds secrets in whatever
// is under it, yet a scalar of one is shown (secrets: none); one after a
// counting word is a number of them (maxTokens, numSecrets). A key that names or locates a secret instead is none:
// existingSecret, a schema's x-kubernetes-patch-merge-key.
func secretKey(key string, siblings []string) keySecrecy {
	lower := strings.ToLower(key)
	if strings.HasPrefix(lower, "existing") || strings.HasPrefix(lower, "x-kubernetes-") {
		return notSecret
	}
	words := keyWords(key)
	if len(words) == 0 {
		return notSecret
	}
	switch last := words[len(words)-1]; {
	case last == "auth" || last == "authorization":
		return scalarSecret
	case last == "credentials":
		return everySecret
	case last == "key" && len(words) == 1:
		for _, s := range siblings {
			if s := strings.ToLower(s); s == "operator" || s == "effect" || s == "value" || s == "path" || s == "property" || strings.HasSuffix(s, "name") {
				return notSecret
			}
		}
		return valueSecret
	case secretWords(words):
		return valueSecret
	case strings.HasSuffix(last, "s"):
		if len(words) > 1 && slices.Contains(countingWords, words[len(words)-2]) {
			return notSecret // maxTokens: {input: 1000} counts tokens, holds none
		}
		words[len(words)-1] = strings.TrimSuffix(last, "s")
		if secretWords(words) {
			return groupSecret
		}
	}
	return notSecret
}

// secretLastWords are the last words of keys that hold a secret; "key" is one
// after the words of keyKinds (apiKey, PRIVATE_KEY, tls.key).
var (
	secretLastWords = []string{"password", "passwd", "pwd", "secret", "token", "credential", "dsn", "apikey", "passphrase", "privatekey", "accesskey", "secretkey"}
	keyKinds        = []string{"api", "private", "access", "secret", "signing", "encryption", "client", "master", "license", "tls", "ssh"}
	// countingWords before a plural make it a number of them (maxTokens,
	// numSecrets), not a group of them.
	countingWords = []string{"max", "min", "num", "number", "total", "count", "limit"}
)

// secretWords reports whether words, a key's in lower case, end in a word that
// names a secret.
func secretWords(words []string) bool {
	n := len(words)
	if slices.Contains(secretLastWords, words[n-1]) {
		return true
	}
	return words[n-1] == "key" && n > 1 && slices.Contains(keyKinds, words[n-2])
}

// keyWords splits a key into its words, in lower case: at a change from lower
// case or a digit to upper case (dbPassword), before the last capital of a run
// followed by a small letter (APIKey), and at every character that is no letter
// or digit (API_KEY, tls.key, client-secret).
func keyWords(key string) []string {
	var words []string
	rs := []rune(key)
	start := 0
	flush := func(end int) {
		if end > start {
			words = append(words, strings.ToLower(string(rs[start:end])))
		}
	}
	for i, r := range rs {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush(i)
			start = i + 1
		case i > start && unicode.IsUpper(r) && (!unicode.IsUpper(rs[i-1]) ||
			i+1 < len(rs) && unicode.IsLower(rs[i+1])):
			flush(i)
			start = i
		}
	}
	flush(len(rs))
	return words
}

// maskedScalar reports whether a scalar under a secret-looking key is masked. A
// boolean, a null or an empty value is not a secret (automountServiceAccountToken:
// false, password: ""), and showing it tells whether a secret is set at all.
func maskedScalar(v any) bool {
	switch x := v.(type) {
	case nil, bool:
		return false
	case string:
		return x != ""
	case map[string]any, []any, absent:
		return false
	}
	return true
}

// schemaKnown reports whether objects of group have a schema Kubernetes itself
// defines: the core group, the groups without a dot (apps, batch, policy) and
// those of k8s.io. A custom resource's group has a dot and is not k8s.io's.
func schemaKnown(group string) bool {
	return !strings.Contains(group, ".") || group == "k8s.io" || strings.HasSuffix(group, ".k8s.io")
}

// keyedSecretAt reports whether scalar v, at path in an object of group (in the
// mapping of siblings' keys, nil when not known), is a secret by its key.
// Metadata is left alone: labels and annotations are what a change edits, and
// the last-applied annotation is masked whole already. A field beside spec is
// not: some kinds keep a secret there (an OpenShift OAuthClient's "secret"), and
// a file of the object masks it (maskfile.go).
func keyedSecretAt(group string, path []string, v any, siblings []string) bool {
	if schemaKnown(group) || len(path) == 0 || path[0] == "metadata" || !maskedScalar(v) {
		return false
	}
	for _, seg := range path[:len(path)-1] { // a list item's label aside
		if !strings.HasPrefix(seg, "[") && secretKey(seg, nil).all() {
			return true // under secrets, credentials
		}
	}
	key := path[len(path)-1]
	if isIndexLabel(key) {
		// An item of a list under the key (an item of a list in a list, under
		// secrets, is found above).
		return len(path) >= 2 && secretKey(path[len(path)-2], nil).items()
	}
	return secretKey(key, siblings).scalar()
}

// helmValuesAt reports whether path, in an object of group, is an Application
// source's values string: Helm values written as YAML text, masked as a values
// file is.
func helmValuesAt(group string, path []string) bool {
	n := len(path)
	return group == "argoproj.io" && n >= 2 && path[n-1] == "values" && path[n-2] == "helm"
}

// kustomizePatchAt reports whether path, in an object of group, is an inline
// patch of an Application source's kustomize patches: YAML or JSON 6902 text,
// masked as a kustomization's inline patch is.
func kustomizePatchAt(group string, path []string) bool {
	n := len(path)
	return group == "argoproj.io" && n >= 4 && path[n-1] == "patch" && path[n-3] == "patches" && path[n-4] == "kustomize"
}

// inlinePatchShape is the shape of the patch text of m, a mapping at path in an
// object of group, and whether m is an inline patch's entry (see
// kustomizePatchAt) whose patch is text.
func inlinePatchShape(group string, path []string, m map[string]any) (docShape, bool) {
	if _, ok := m["patch"].(string); !ok || !kustomizePatchAt(group, childPath(path, "patch")) {
		return docShape{}, false
	}
	return docShape{target: patchEntryTarget(m)}, true
}

// patchEntryTarget is what the target of m, a kustomize patches entry as
// decoded, selects.
func patchEntryTarget(m map[string]any) patchTarget {
	t, _ := m["target"].(map[string]any)
	group, _ := t["group"].(string)
	kind, _ := t["kind"].(string)
	return patchTarget{group: group, kind: kind}
}

// maskedText is s, YAML text of shape, with its secret values replaced.
func maskedText(s string, shape docShape) string {
	return strings.Join(maskYAMLLines([]byte(s), splitLines([]byte(s)), shape), "")
}

// isIndexLabel reports whether a path segment is a list index ("[0]").
func isIndexLabel(seg string) bool {
	digits, ok := strings.CutPrefix(seg, "[")
	digits, closed := strings.CutSuffix(digits, "]")
	return ok && closed && digits != "" && strings.Trim(digits, "0123456789") == ""
}

func mapKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// isSensitivePath reports whether the value at path (from the object root) of an
// object of this group and kind must never be shown. Path segments are map keys and
// list item labels as the comparer writes them ("[name=X]", "[0]").
func isSensitivePath(group, kind string, path []string) bool {
	if len(path) == 0 {
		return false
	}
	// An env entry (or any named item) whose name looks secret: its value.
	if n := len(path); n >= 2 && path[n-1] == "value" {
		if name, ok := strings.CutPrefix(path[n-2], "[name="); ok && looksSecret(strings.TrimSuffix(name, "]")) {
			return true
		}
	}
	// The last-applied annotation is a copy of the whole object, secrets included.
	if len(path) >= 3 && path[0] == "metadata" && path[1] == "annotations" && path[2] == lastAppliedAnnotation {
		return true
	}
	if group != "" {
		return false
	}
	switch kind {
	case "Secret":
		return path[0] == "data" || path[0] == "stringData"
	case "ConfigMap":
		return len(path) >= 2 && (path[0] == "data" || path[0] == "binaryData") && looksSecret(path[1])
	}
	return false
}

// entryName is the name an entry of a list of settings gives itself, whose
// "value" is a secret when the name looks like one's: its "name" (a container's
// env, a workflow's parameters), or the "key" of a mapping of a key and a value
// alone (a custom resource's [{key: API_TOKEN, value: ...}]; a toleration's key,
// beside its operator and effect, names no setting). get reads a key's string.
func entryName(keys []string, get func(string) string) string {
	if n := get("name"); n != "" {
		return n
	}
	if len(keys) == 2 && slices.Contains(keys, "key") && slices.Contains(keys, "value") {
		return get("key")
	}
	return ""
}

// maskBody returns a copy of an object's body with every sensitive value replaced.
func maskBody(group, kind string, body map[string]any) map[string]any {
	if body == nil {
		return nil
	}
	return maskValueAt(group, kind, nil, body).(map[string]any)
}

// maskValueAt returns a copy of v, found at path in an object of group and kind,
// with every sensitive value in it replaced. A sensitive map keeps its keys.
func maskValueAt(group, kind string, path []string, v any) any {
	return maskValueIn(group, kind, path, v, nil)
}

// maskValueIn is maskValueAt for v in a mapping of the keys siblings (nil when
// not known).
func maskValueIn(group, kind string, path []string, v any, siblings []string) any {
	if isAbsent(v) || v == nil {
		return v
	}
	sensitive := isSensitivePath(group, kind, path)
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		// A map that names itself like a secret holds its value in "value", wherever
		// it sits (an env entry outside a named list, a patch's value).
		keys := mapKeys(x)
		named := entryName(keys, func(k string) string { s, _ := x[k].(string); return s })
		patch, inline := inlinePatchShape(group, path, x)
		for k, cv := range x {
			switch {
			case sensitive:
				out[k] = redacted
			case k == "value" && looksSecret(named):
				out[k] = redacted
			case k == "patch" && inline:
				out[k] = maskedText(cv.(string), patch)
			default:
				out[k] = maskValueIn(group, kind, childPath(path, k), cv, keys)
			}
		}
		return out
	case []any:
		if sensitive {
			return redacted
		}
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = maskValueIn(group, kind, childPath(path, itemLabel(it, i)), it, nil)
		}
		return out
	}
	if sensitive || keyedSecretAt(group, path, v, siblings) {
		return redacted
	}
	if s, ok := v.(string); ok && helmValuesAt(group, path) {
		return strings.Join(maskFileLines([]byte(s), roleValues), "")
	}
	if s, ok := v.(string); ok && kustomizePatchAt(group, path) {
		return maskedText(s, docShape{}) // its target not known here: masked by key
	}
	if privateKeyAt(group, path, v) {
		return redacted
	}
	return v
}

// childPath appends without sharing the parent's backing array between siblings.
func childPath(path []string, seg string) []string {
	return append(path[:len(path):len(path)], seg)
}

// MaskText replaces in text every secret value of objects (as isSensitivePath and
// the secret-named "value" rule find them, base64 forms included): for words from
// elsewhere about those objects, such as a cluster's refusal of a dry-run, where an
// admission policy may quote an env value.
func MaskText(objects []ChangedObject, text string) string {
	var values []string
	for _, o := range objects {
		apiVersion, _ := o.Object["apiVersion"].(string)
		kind, _ := o.Object["kind"].(string)
		collectSensitive(groupOf(apiVersion), kind, nil, o.Object, false, nil, &values)
	}
	return newScrubber(values).text(text)
}

// collectSensitive appends the scalar values under v (in a mapping of the keys
// siblings) that maskValueAt would mask.
func collectSensitive(group, kind string, path []string, v any, sensitive bool, siblings []string, out *[]string) {
	sensitive = sensitive || isSensitivePath(group, kind, path)
	switch x := v.(type) {
	case map[string]any:
		keys := mapKeys(x)
		named := entryName(keys, func(k string) string { s, _ := x[k].(string); return s })
		if patch, inline := inlinePatchShape(group, path, x); inline && !sensitive {
			*out = append(*out, yamlSecretValues([]byte(x["patch"].(string)), patch)...)
		}
		for k, cv := range x {
			collectSensitive(group, kind, childPath(path, k), cv, sensitive || (k == "value" && looksSecret(named)), keys, out)
		}
	case []any:
		for i, it := range x {
			collectSensitive(group, kind, childPath(path, itemLabel(it, i)), it, sensitive, nil, out)
		}
	case string:
		if !sensitive && helmValuesAt(group, path) {
			*out = append(*out, fileSecretValues([]byte(x), roleValues)...)
		}
		if !sensitive && privateKeyAt(group, path, x) {
			*out = append(*out, secretTexts(x)...)
		}
		if sensitive || keyedSecretAt(group, path, x, siblings) && scrubbedByKey(x) {
			*out = append(*out, x)
			if group == "" && len(path) > 0 && (kind == "Secret" && path[0] == "data" || kind == "ConfigMap" && path[0] == "binaryData") {
				if decoded, ok := decodedData(x); ok {
					*out = append(*out, decoded)
				}
			}
		}
	case int64, float64:
		// A number masked for its key (pin: 4242424242) is a secret as a string
		// is; a message writes it as its manifest did or as Go prints it.
		if sensitive || keyedSecretAt(group, path, x, siblings) {
			*out = append(*out, numberTexts(x)...)
		}
	}
}

// numberTexts are the ways text writes a decoded number: as YAML and JSON write
// it (4242424242, 7070707070.5) and as Go prints it (9.87654321e+12).
func numberTexts(v any) []string {
	switch x := v.(type) {
	case int64:
		return []string{strconv.FormatInt(x, 10)}
	case float64:
		return []string{strconv.FormatFloat(x, 'f', -1, 64), fmt.Sprint(x)}
	}
	return nil
}

// MaskedChange returns c, a change as its request gave it (a Change as decoded
// JSON), with the values masked that a diff of its target, an object of
// apiVersion and kind, masks: an env value named like a secret, a merge patch's values at
// the paths the object's diff masks, a pointer patch's value at such a path (or
// at an env entry's value by index, as a patch file's is), a new resource's
// manifest as its file. c itself is left as it is.
func MaskedChange(apiVersion, kind string, c map[string]any) map[string]any {
	group := groupOf(apiVersion)
	out := maps.Clone(c)
	if e, ok := c["env"].(map[string]any); ok {
		env := maps.Clone(e)
		if set, ok := e["set"].(map[string]any); ok {
			masked := maps.Clone(set)
			for name, v := range set {
				if looksSecret(name) || holdsSecretText(v) {
					masked[name] = redacted
				}
			}
			env["set"] = masked
		}
		out["env"] = env
	}
	if p, ok := c["patch"].(map[string]any); ok {
		patch := maps.Clone(p)
		if m, ok := p["merge"]; ok {
			patch["merge"] = maskValueAt(group, kind, nil, m)
		}
		if set, ok := p["set"].([]any); ok {
			ops := slices.Clone(set)
			for i, it := range set {
				if op, ok := it.(map[string]any); ok && op["value"] != nil {
					at, _ := op["path"].(string)
					masked := maps.Clone(op)
					masked["value"] = maskedPointerValue(group, kind, jsonPointer(at), op["value"])
					ops[i] = masked
				}
			}
			patch["set"] = ops
		}
		out["patch"] = patch
	}
	if n, ok := c["new_resource"].(map[string]any); ok {
		if m, ok := n["manifest"].(string); ok {
			res := maps.Clone(n)
			res["manifest"] = strings.Join(maskFileLines([]byte(m), roleManifest), "")
			out["new_resource"] = res
		}
	}
	return out
}

// maskedPointerValue is v, the value a patch sets at the JSON pointer segs of
// an object of group and kind, masked as the object's diff masks it there.
func maskedPointerValue(group, kind string, segs []string, v any) any {
	if len(segs) == 1 && segs[0] == "" {
		segs = nil // "/", taken for the whole object as a patch file's is (see wholeObjectPointer)
	}
	if envValueByIndex(segs) {
		return redacted // the variable's name is not in the patch
	}
	labels := make([]string, len(segs))
	for i, s := range segs {
		switch {
		case s == "-":
			labels[i] = "[0]" // an item appended, masked as any item of its list
		case pointerIndex(s):
			labels[i] = "[" + s + "]"
		default:
			labels[i] = s
		}
	}
	return maskValueAt(group, kind, labels, v)
}
