package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"

	goccy "github.com/goccy/go-yaml"
	goccyparser "github.com/goccy/go-yaml/parser"
	"gopkg.in/yaml.v3"
)

// ConfigFile is where a repository keeps its rules: the root of its default
// branch, so a pull request cannot loosen the rules it is checked by.
const ConfigFile = ".kukie.yml"

// MaxConfigBytes bounds the file read; a policy is a few dozen lines.
const MaxConfigBytes = 64 << 10

// Level is how much a rule's finding weighs. The zero value is off.
type Level string

// Levels, weakest first. Error fails the check; warning and notice annotate.
const (
	LevelOff     Level = ""
	LevelNotice  Level = "notice"
	LevelWarning Level = "warning"
	LevelError   Level = "error"
)

// UnmarshalYAML accepts the spelled-out levels only.
func (l *Level) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &ParseError{Line: n.Line, Msg: "level must be one of off, notice, warning, error"}
	}
	switch n.Value {
	case "off":
		*l = LevelOff
	case string(LevelNotice), string(LevelWarning), string(LevelError):
		*l = Level(n.Value)
	default:
		return &ParseError{Line: n.Line, Msg: fmt.Sprintf("level %q is not one of off, notice, warning, error", n.Value)}
	}
	return nil
}

// annotationLevel is the level GitHub shows.
func (l Level) annotationLevel() string {
	if l == LevelError {
		return "failure"
	}
	return string(l)
}

// Config is a parsed .kukie.yml. Every rule is off unless the file turns it on.
type Config struct {
	// Version is the schema's version; 1 (or absent, meaning 1) is the only one.
	Version int   `yaml:"version"`
	Rules   Rules `yaml:"rules"`
}

// Rules are the checks a policy may turn on, each with its level.
type Rules struct {
	// ImageDigest: every container image is pinned by digest (name@sha256:…).
	ImageDigest Rule `yaml:"image_digest"`
	// ImageRegistries: every container image comes from one of Allowed.
	ImageRegistries RegistryRule `yaml:"image_registries"`
	// Namespaces: every namespaced object (and every Namespace object) is in one of
	// Allowed.
	Namespaces NamespaceRule `yaml:"namespaces"`
	// SecretValues: no Secret carries data in the repository (a Secret object with
	// data or stringData, or one a kustomize secretGenerator makes from literals,
	// env files or files), and no container's env variable of a secret-looking
	// name (DB_PASSWORD, API_TOKEN, apiKey: as render masks them) has a plain
	// value other than "", "true" or "false", nor one of any name holding a
	// URL's password or a private key (render.PlainSecretValue).
	SecretValues Rule `yaml:"secret_values"`
	// DeniedKinds: none of Kinds is rendered.
	DeniedKinds DeniedKindsRule `yaml:"denied_kinds"`
	// DryRun: the destination cluster accepts the changed objects in a server-side
	// dry-run.
	DryRun Rule `yaml:"dry_run"`
}

// Rule is a rule with nothing to configure but its level.
type Rule struct {
	Level Level `yaml:"level"`
}

// RegistryRule lists the registries images may come from: "ghcr.io/acme" allows
// ghcr.io/acme/… ; "docker.io" allows every Docker Hub image (a bare "nginx" is
// docker.io/library/nginx, as the container runtime reads it).
type RegistryRule struct {
	Level   Level    `yaml:"level"`
	Allowed []string `yaml:"allowed"`
}

// NamespaceRule lists the namespaces objects may be applied in, as patterns of
// path.Match ("shop-*", "team-?").
type NamespaceRule struct {
	Level   Level    `yaml:"level"`
	Allowed []string `yaml:"allowed"`
}

// allows reports whether ns matches an allowed pattern (validated by Parse).
func (r NamespaceRule) allows(ns string) bool {
	for _, p := range r.Allowed {
		if ok, _ := path.Match(p, ns); ok {
			return true
		}
	}
	return false
}

// DeniedKindsRule lists kinds that may not be rendered.
type DeniedKindsRule struct {
	Level Level        `yaml:"level"`
	Kinds []DeniedKind `yaml:"kinds"`
}

// DeniedKind names a kind; Group, when set, narrows it to one API group ("" for
// any); RoleRef, for RoleBinding and ClusterRoleBinding, narrows it to bindings of
// that role ("cluster-admin").
type DeniedKind struct {
	Kind    string  `yaml:"kind"`
	Group   *string `yaml:"group"`
	RoleRef string  `yaml:"role_ref"`
}

// Enabled reports whether any rule is on.
func (c *Config) Enabled() bool {
	r := c.Rules
	return r.ImageDigest.Level != LevelOff || r.ImageRegistries.Level != LevelOff || r.Namespaces.Level != LevelOff ||
		r.SecretValues.Level != LevelOff || r.DeniedKinds.Level != LevelOff || r.DryRun.Level != LevelOff
}

// ParseError is a .kukie.yml that cannot be used, at the line (from 1; 0 when
// unknown) that makes it so.
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s line %d: %s", ConfigFile, e.Line, e.Msg)
	}
	return ConfigFile + ": " + e.Msg
}

// Parse reads a .kukie.yml strictly: one YAML document, no anchors or aliases,
// only the keys of the schema, every level spelled out, every list a rule needs
// present. An empty file turns nothing on. Every failure is a *ParseError.
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxConfigBytes {
		return nil, &ParseError{Msg: fmt.Sprintf("the file has %d bytes, more than the %d a policy may have", len(data), MaxConfigBytes)}
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return &Config{}, nil
		}
		return nil, syntaxError(data, err)
	}
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		line := second.Line
		if err != nil {
			return nil, syntaxError(data, err)
		}
		return nil, &ParseError{Line: line, Msg: "the file holds more than one YAML document"}
	}
	if n := findAlias(&root); n != nil {
		return nil, &ParseError{Line: n.Line, Msg: "anchors and aliases are not allowed"}
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind == yaml.ScalarNode && doc.Tag == "!!null" {
		return &Config{}, nil
	}
	if doc.Kind != yaml.MappingNode {
		return nil, &ParseError{Line: doc.Line, Msg: "the file must be a mapping (version, rules)"}
	}
	var c Config
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(&c); err != nil {
		return nil, yamlError(err)
	}
	if err := c.validate(doc); err != nil {
		return nil, err
	}
	return &c, nil
}

// validate checks what the decoder cannot, with the line of the key at fault.
func (c *Config) validate(doc *yaml.Node) error {
	if c.Version != 0 && c.Version != 1 {
		return &ParseError{Line: lineOf(doc, "version"), Msg: fmt.Sprintf("version %d is not supported; the only version is 1", c.Version)}
	}
	r := &c.Rules
	if r.ImageRegistries.Level != LevelOff && len(r.ImageRegistries.Allowed) == 0 {
		return &ParseError{Line: lineOf(doc, "rules", "image_registries"), Msg: "image_registries needs a list of allowed registries"}
	}
	for i, reg := range r.ImageRegistries.Allowed {
		if !validRegistry(reg) {
			return &ParseError{Line: itemLine(doc, i, "rules", "image_registries", "allowed"),
				Msg: fmt.Sprintf("allowed registry %q must be a registry host, optionally with a path (ghcr.io/acme), without a tag or digest", reg)}
		}
	}
	if r.Namespaces.Level != LevelOff && len(r.Namespaces.Allowed) == 0 {
		return &ParseError{Line: lineOf(doc, "rules", "namespaces"), Msg: "namespaces needs a list of allowed namespaces"}
	}
	for i, p := range r.Namespaces.Allowed {
		if _, err := path.Match(p, ""); p == "" || err != nil {
			return &ParseError{Line: itemLine(doc, i, "rules", "namespaces", "allowed"), Msg: fmt.Sprintf("allowed namespace %q is not a pattern (shop-*, team-?)", p)}
		}
	}
	if r.DeniedKinds.Level != LevelOff && len(r.DeniedKinds.Kinds) == 0 {
		return &ParseError{Line: lineOf(doc, "rules", "denied_kinds"), Msg: "denied_kinds needs a list of kinds"}
	}
	for i, k := range r.DeniedKinds.Kinds {
		line := itemLine(doc, i, "rules", "denied_kinds", "kinds")
		if k.Kind == "" {
			return &ParseError{Line: line, Msg: "a denied kind needs kind"}
		}
		if k.RoleRef != "" && k.Kind != "RoleBinding" && k.Kind != "ClusterRoleBinding" {
			return &ParseError{Line: line, Msg: fmt.Sprintf("role_ref applies to RoleBinding and ClusterRoleBinding, not %s", k.Kind)}
		}
	}
	return nil
}

// validRegistry accepts a host (with a port, perhaps) and an optional path, and
// nothing that names one image (a tag or a digest).
func validRegistry(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t@") || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") {
		return false
	}
	if i := strings.Index(s, "/"); i >= 0 && strings.Contains(s[i:], ":") {
		return false
	}
	return true
}

// lineReported finds the line yaml.v3 names in an error message ("line 3: …").
var lineReported = regexp.MustCompile(`line (\d+): `)

// unknownField rewrites yaml.v3's words for an unknown key, which name Go types.
var unknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)

// goTypes names the schema's Go types as the file's author knows them.
var goTypes = strings.NewReplacer("into policy.Level", "into a level", "into []policy.DeniedKind", "into a list of kinds",
	"into []string", "into a list", "into policy.DeniedKind", "into a kind entry", "into policy.Config", "into the policy (a mapping)",
	"into policy.Rules", "into rules (a mapping)", "into policy.Rule", "into a rule (a mapping with level)",
	"into policy.RegistryRule", "into a rule (a mapping)", "into policy.NamespaceRule", "into a rule (a mapping)",
	"into policy.DeniedKindsRule", "into a rule (a mapping)", "into *string", "into a string")

// yamlError turns a decoder error into a ParseError at its first line.
func yamlError(err error) error {
	var pe *ParseError
	if errors.As(err, &pe) {
		return pe
	}
	var te *yaml.TypeError
	msgs := []string{err.Error()}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	line := 0
	for i, m := range msgs {
		m = strings.TrimPrefix(m, "yaml: ")
		if loc := lineReported.FindStringSubmatchIndex(m); loc != nil {
			if line == 0 {
				line, _ = strconv.Atoi(m[loc[2]:loc[3]])
			}
			m = m[:loc[0]] + m[loc[1]:]
		}
		m = unknownField.ReplaceAllString(m, `unknown key "$1"`)
		m = goTypes.Replace(m)
		msgs[i] = m
	}
	return &ParseError{Line: line, Msg: strings.Join(msgs, "; ")}
}

// syntaxError is yamlError for a file yaml.v3 cannot parse, at the line of the
// fault. yaml.v3's message names where the block it was parsing starts (and, for
// its parser's errors, the line before it), which in a policy is mostly line 2,
// "rules:"; goccy/go-yaml's parser reports the token at fault, so its line is the
// one marked. yaml.v3 stays the judge and its words the message: its line is kept
// when goccy accepts the file or places the fault before the block yaml.v3 names.
func syntaxError(data []byte, err error) error {
	pe, ok := yamlError(err).(*ParseError)
	if !ok {
		return err
	}
	_, perr := goccyparser.ParseBytes(data, 0)
	var se *goccy.SyntaxError
	if errors.As(perr, &se) && se.Token != nil && se.Token.Position != nil && se.Token.Position.Line >= pe.Line {
		pe.Line = se.Token.Position.Line
	}
	return pe
}

func findAlias(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return n
	}
	for _, c := range n.Content {
		if a := findAlias(c); a != nil {
			return a
		}
	}
	return nil
}

// valueAt is the value node under the mapping keys of path, or nil.
func valueAt(n *yaml.Node, path ...string) (key, value *yaml.Node) {
	value = n
	for _, k := range path {
		if value == nil || value.Kind != yaml.MappingNode {
			return nil, nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(value.Content); i += 2 {
			if value.Content[i].Value == k {
				key, next = value.Content[i], value.Content[i+1]
			}
		}
		value = next
	}
	return key, value
}

// lineOf is the line of the last key of path, or of the deepest one present.
func lineOf(doc *yaml.Node, path ...string) int {
	for i := len(path); i > 0; i-- {
		if k, _ := valueAt(doc, path[:i]...); k != nil {
			return k.Line
		}
	}
	return doc.Line
}

// itemLine is the line of item i of the list under path.
func itemLine(doc *yaml.Node, i int, path ...string) int {
	if _, v := valueAt(doc, path...); v != nil && v.Kind == yaml.SequenceNode && i < len(v.Content) {
		return v.Content[i].Line
	}
	return lineOf(doc, path...)
}
