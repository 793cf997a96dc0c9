package policy

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseDefaultsOff(t *testing.T) {
	for name, file := range map[string]string{
		"empty":                  "",
		"comments only":          "# nothing yet\n",
		"no rules":               "version: 1\n",
		"empty rules":            "rules: {}\n",
		"rules without a level":  "rules:\n  image_digest: {}\n  image_registries:\n    allowed: [ghcr.io/acme]\n  dry_run:\n",
		"every rule spelled off": "rules:\n  image_digest: {level: off}\n  secret_values: {level: off}\n  denied_kinds: {level: off}\n",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Parse([]byte(file))
			if err != nil {
				t.Fatal(err)
			}
			if c.Enabled() {
				t.Fatalf("rules on: %+v", c.Rules)
			}
		})
	}
}

func TestParseRefusesWithTheLine(t *testing.T) {
	cases := map[string]struct {
		file string
		line int
		msg  string
	}{
		"an unknown top-level key":     {"version: 1\nrule:\n  image_digest: {level: error}\n", 2, `unknown key "rule"`},
		"an unknown rule":              {"rules:\n  image_digest:\n    level: error\n  image_tags:\n    level: error\n", 4, `unknown key "image_tags"`},
		"an unknown key in a rule":     {"rules:\n  image_digest:\n    level: error\n    levle: warning\n", 4, `unknown key "levle"`},
		"an unknown key in a kind":     {"rules:\n  denied_kinds:\n    level: error\n    kinds:\n    - kind: ClusterRoleBinding\n      roleref: cluster-admin\n", 6, `unknown key "roleref"`},
		"a misspelt level":             {"rules:\n  secret_values:\n    level: fatal\n", 3, `level "fatal" is not one of off, notice, warning, error`},
		"a rule that is not a mapping": {"rules:\n  image_digest: error\n", 2, "into a rule (a mapping with level)"},
		"registries without a list":    {"rules:\n  image_registries:\n    level: error\n", 2, "needs a list of allowed registries"},
		"a registry with a tag":        {"rules:\n  image_registries:\n    level: error\n    allowed:\n    - ghcr.io/acme\n    - docker.io/library/nginx:1.0\n", 6, `"docker.io/library/nginx:1.0"`},
		"a bad namespace pattern":      {"rules:\n  namespaces:\n    level: warning\n    allowed: [shop-*, \"team-[\"]\n", 4, `"team-["`},
		"a denied kind without kind":   {"rules:\n  denied_kinds:\n    level: error\n    kinds:\n    - group: rbac.authorization.k8s.io\n", 5, "needs kind"},
		"role_ref on another kind":     {"rules:\n  denied_kinds:\n    level: error\n    kinds:\n    - kind: Deployment\n      role_ref: admin\n", 5, "role_ref applies to RoleBinding"},
		"a second version":             {"version: 2\nrules: {}\n", 1, "version 2 is not supported"},
		"two documents":                {"rules: {}\n---\nrules: {}\n", 2, "more than one YAML document"},
		"an alias":                     {"levels:\n  e: &e error\nrules:\n  image_digest: {level: *e}\n", 2, "anchors and aliases"},
		"a syntax error":               {"rules:\n  image_digest:\n\tlevel: error\n", 3, "cannot start any token"},
		"a duplicate key":              {"rules:\n  image_digest: {level: error}\n  image_digest: {level: off}\n", 3, `"image_digest" already defined`},
		"not a mapping":                {"- rules\n", 1, "must be a mapping"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pe := parseError(t, tc.file, tc.line, tc.msg)
			if strings.Contains(pe.Msg, "policy.") {
				t.Errorf("message names a Go type: %q", pe.Msg)
			}
		})
	}
}

func TestParseTooLarge(t *testing.T) {
	_, err := Parse([]byte("# " + strings.Repeat("x", MaxConfigBytes) + "\n"))
	var pe *ParseError
	if !errors.As(err, &pe) || !strings.Contains(pe.Msg, "more than") {
		t.Fatalf("Parse = %v, want the size refused", err)
	}
}

// TestParseREADMEExample holds the README's example policy to the schema.
func TestParseREADMEExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const start = "```yaml\n"
	_, rest, ok := strings.Cut(string(readme), start+"# .kukie.yml:")
	example, _, closed := strings.Cut("# .kukie.yml:"+rest, "```")
	if !ok || !closed {
		t.Fatal("README has no example .kukie.yml")
	}
	c, err := Parse([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Rules
	if r.ImageDigest.Level != LevelError || r.ImageRegistries.Level != LevelError || len(r.ImageRegistries.Allowed) != 2 ||
		r.Namespaces.Level != LevelWarning || r.SecretValues.Level != LevelError || r.DeniedKinds.Level != LevelError ||
		len(r.DeniedKinds.Kinds) != 2 || r.DeniedKinds.Kinds[0].RoleRef != "cluster-admin" || r.DryRun.Level != LevelError {
		t.Fatalf("rules %+v", r)
	}
}

// TestParseSyntaxErrorAtItsLine: a YAML syntax error is refused at the line that
// holds the fault, not at the start of the block around it (where yaml.v3's own
// message points), and with yaml.v3's words.
func TestParseSyntaxErrorAtItsLine(t *testing.T) {
	const head = "version: 1\nrules:\n  image_digest:\n    level: error\n"
	cases := map[string]struct {
		file string
		line int
		msg  string
	}{
		"a key indented too far":     {head + "  dry_run:\n      level: error\n    x: 1\n", 7, "did not find expected key"},
		"a key indented too little":  {head + "   secret_values: {level: error}\n", 5, "did not find expected key"},
		"a mapping in a plain value": {head + "  namespaces:\n    level: error\n    allowed: shop: web\n", 7, "mapping values are not allowed"},
		"a tab for indentation":      {head + "\tdry_run: {level: error}\n", 5, "tab character"},
		"an unclosed quote":          {head + "  dry_run:\n    level: \"error\n", 6, "unexpected end of stream"},
		"an unclosed flow list":      {head + "  namespaces:\n    level: error\n    allowed: [shop, web\n  dry_run: {level: error}\n", 8, "did not find expected ',' or ']'"},
		"a list item among keys":     {head + "  dry_run:\n    level: error\n    - notice\n", 7, "did not find expected key"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if pe := parseError(t, tc.file, tc.line, tc.msg); strings.Contains(pe.Msg, "line ") {
				t.Errorf("message names a line of its own: %q", pe.Msg)
			}
		})
	}
}

// parseError is Parse's refusal of file, which must be at line and say msg.
func parseError(t *testing.T, file string, line int, msg string) *ParseError {
	t.Helper()
	_, err := Parse([]byte(file))
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("Parse = %v, want a *ParseError", err)
	}
	if pe.Line != line || !strings.Contains(pe.Msg, msg) {
		t.Fatalf("line %d %q, want line %d with %q", pe.Line, pe.Msg, line, msg)
	}
	return pe
}
