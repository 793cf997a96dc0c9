package render

import (
	"bytes"
	"strings"
	"testing"
	"testing/fstest"

	"gopkg.in/yaml.v3"
)

// FuzzMaskedFileHidesSecretValues reads any repository file as read_repo_file
// shows it: a value a Secret's data or stringData, a ConfigMap's secret-looking
// key, an entry named like a secret or, in a document of no known schema (Helm
// values, a custom resource, an Application's values string), a secret-looking
// key holds as the YAML parser reads the file is never shown, and the file keeps
// its lines.
func FuzzMaskedFileHidesSecretValues(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData:\n  password: hunter2hunter2\ndata:\n  key: aHVudGVyMg==\n",
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData: {a: quietvalue1, b: 'quietvalue2'}\n",
		"kind: Secret\napiVersion: v1\nstringData:\n  a: |\n    line-one-secret\n    line-two-secret\n",
		"---\napiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n---\napiVersion: v1\nkind: Secret\nstringData: {tok: abcdefghij}\n",
		"x: &s {tok: zyxwvutsrq}\napiVersion: v1\nkind: Secret\nstringData: *s\n",
		"apiVersion: v1\r\nkind: Secret\r\nstringData:\r\n  a: crlf-secret-1\r\n",
		"apiVersion: v1\nkind: Secret\n<<: {stringData: {a: merged-secret}}\n",
		"x: &p hunter2value\napiVersion: v1\nkind: ConfigMap\ndata:\n  password: *p\n",
		"apiVersion: v1\nkind: ConfigMap\n<<: {data: {password: merged-secret}}\n",
		"d: &d {kind: Secret, apiVersion: v1}\n<<: *d\nstringData: {a: merged-kind-secret}\n",
		"x: &p [a]\ny: &q {p: *p, v: hunter2value}\nkind: Deployment\nenv:\n- name: DB_PASSWORD\n  value: *q\n",
		"x: &k Secret\napiVersion: v1\nkind: *k\nstringData:\n  token: aliasKindSecret1\n",
		"x: &k ConfigMap\napiVersion: v1\nkind: *k\ndata:\n  password: aliasKindSecret2\n",
		"apiVersion: v1\nkind: ConfigMap\ndata:\n  <<: {password: mergedDataSecret}\n  color: blue\n",
		"apiVersion: apps/v1\nkind: Deployment\nspec:\n  env:\n  - <<: {name: DB_PASSWORD}\n    value: mergedNameSecret\n",
		"apiVersion: v1\n<<: {kind: Secret}\nstringData:\n  a: mergedKindSecret\n",
		"db:\n  password: valuesSecret1\n  enabled: false\napiKey: 'valuesSecret2'\ntokens: [valuesSecret3]\n",
		"d: &d {password: mergedValues1}\nprod:\n  <<: *d\n",
		"apiVersion: example.com/v1\nkind: Db\nmetadata: {name: db}\nspec:\n  auth: {token: customSecret1, passwordSecretRef: {name: db, key: pw}}\n",
		"apiVersion: argoproj.io/v1alpha1\nkind: Application\nspec:\n  source:\n    helm:\n      valuesObject: {db: {password: objSecret1}}\n" +
			"      values: |\n        apiKey: stringSecret1\n",
		"kind: Kustomization\napiVersion: kustomize.config.k8s.io/v1beta1\nhelmCharts:\n- name: x\n  valuesInline:\n    token: inlineSecret1\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if s := scanYAML("f.yaml", data); s.err != nil {
			return // read_repo_file reads no file render would not
		}
		out, err := MaskedFile(fstest.MapFS{"f.yaml": {Data: data}}, "f.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Count(out, "\n"), bytes.Count(data, []byte("\n")); got != want {
			t.Fatalf("masked file has %d line breaks, the file %d", got, want)
		}
		for _, v := range secretValues(data) {
			// A value written once, as it is, is the value: shown, it leaked.
			// One written elsewhere too, or escaped, cannot be told apart here.
			if len(v) >= 6 && bytes.Count(data, []byte(v)) == 1 && strings.Contains(out, v) {
				t.Fatalf("secret value %q shown:\n%s", v, out)
			}
		}
	})
}

// secretValues are the values of every Secret of data, as a decoder of it into
// objects reads them.
func secretValues(data []byte) []string {
	var out []string
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			return out
		}
		namedValues(doc, &out)
		apiVersion, _ := doc["apiVersion"].(string)
		kind, _ := doc["kind"].(string)
		object := apiVersion != "" && kind != ""
		if !object || !schemaKnown(groupOf(apiVersion)) {
			keyedValues(doc, object, "", &out)
		}
		if charts, _ := doc["helmCharts"].([]any); object {
			for _, c := range charts {
				if c, ok := c.(map[string]any); ok {
					keyedValues(c["valuesInline"], false, "", &out)
				}
			}
		}
		if strings.Contains(apiVersion, "/") {
			continue
		}
		for _, field := range []string{"data", "stringData"} {
			m, _ := doc[field].(map[string]any)
			for k, v := range m {
				if s, ok := v.(string); ok && (doc["kind"] == "Secret" || doc["kind"] == "ConfigMap" && looksSecret(k)) {
					out = append(out, s)
				}
			}
		}
	}
}

// namedValues adds the scalar values below the "value" of every mapping below v
// whose "name" looks like a secret's.
func namedValues(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		if name, _ := x["name"].(string); looksSecret(name) {
			scalars(x["value"], out)
		}
		for k, e := range x {
			if k != "value" {
				namedValues(e, out)
			}
		}
	case []any:
		for _, e := range x {
			namedValues(e, out)
		}
	}
}

// keyedValues adds the string values below v of secret-looking keys (the
// string items of lists under them, every string under a plural one), an
// object's metadata (skipMeta) aside, and those of the Helm values strings
// below v.
func keyedValues(v any, skipMeta bool, parent string, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		keys := mapKeys(x)
		for k, e := range x {
			s, isString := e.(string)
			switch {
			case skipMeta && k == "metadata":
			case parent == "helm" && k == "values" && isString:
				*out = append(*out, secretValues([]byte(s))...)
			case secretKey(k, keys).scalar() && isString:
				*out = append(*out, s)
			case secretKey(k, keys).all() && !isString:
				scalars(e, out)
			case secretKey(k, keys).items():
				if items, ok := e.([]any); ok {
					for _, it := range items {
						if s, ok := it.(string); ok {
							*out = append(*out, s)
						}
					}
				}
				keyedValues(e, false, k, out)
			default:
				keyedValues(e, false, k, out)
			}
		}
	case []any:
		for _, e := range x {
			keyedValues(e, false, "", out)
		}
	}
}

func scalars(v any, out *[]string) {
	switch x := v.(type) {
	case string:
		*out = append(*out, x)
	case map[string]any:
		for _, e := range x {
			scalars(e, out)
		}
	case []any:
		for _, e := range x {
			scalars(e, out)
		}
	}
}

// TestMaskedFileOfUncertainKindIsMaskedWhole covers what the parser of the fuzz
// target refuses to read: a kind given twice, which decoders read differently.
func TestMaskedFileOfUncertainKindIsMaskedWhole(t *testing.T) {
	for name, doc := range map[string]string{
		"kind twice":       "kind: ConfigMap\napiVersion: v1\nkind: Secret\nstringData: {a: dup-kind-secret}\n",
		"apiVersion twice": "apiVersion: apps/v1\napiVersion: v1\nkind: Secret\nstringData: {a: dup-kind-secret}\n",
	} {
		out, err := MaskedFile(fstest.MapFS{"f.yaml": {Data: []byte(doc)}}, "f.yaml", nil)
		if err != nil || strings.Contains(out, "dup-kind-secret") {
			t.Errorf("%s: %v\n%s", name, err, out)
		}
	}
}
