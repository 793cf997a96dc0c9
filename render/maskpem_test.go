package render

import (
	"encoding/base64"
	"strings"
	"testing"
	"testing/fstest"
)

// A private key written for these tests: the shape of one, not a key.
var (
	pemKeyLines  = []string{"kkPemBodyLine0001AAAAB3NzaC1yc2E", "kkPemBodyLine0002QAAAIEAx9Jv/+w==", "kkPemBodyLine0003ZZZZ"}
	pemCertLines = []string{"kkCertBodyLine001MIIDdzCCAl+gAwIB", "kkCertBodyLine002AgIUQ=="}
)

// pemBlock is a PEM block of type kind, its lines each followed by a newline
// and indented by indent.
func pemBlock(kind, indent string, body []string) string {
	var b strings.Builder
	b.WriteString(indent + "-----BEGIN " + kind + "-----\n")
	for _, l := range body {
		b.WriteString(indent + l + "\n")
	}
	b.WriteString(indent + "-----END " + kind + "-----\n")
	return b.String()
}

// TestPrivateKeysAreMaskedWhateverTheirKey: a value that is a private key is
// masked by what it is, under a key that does not look secret (server.pem,
// tls.pem, an env entry's CERT_BUNDLE, a custom resource's field), in every
// kind of PEM private key, and so is a private key block in a file that is no
// YAML; a certificate stays shown (failed before: every one of these keys was
// shown whole).
func TestPrivateKeysAreMaskedWhateverTheirKey(t *testing.T) {
	quoted := "\"-----BEGIN EC PRIVATE KEY-----\\n" + strings.Join(pemKeyLines, "\\n") + "\\n-----END EC PRIVATE KEY-----\\n\""
	fsys := fstest.MapFS{
		"app/config.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tls\ndata:\n  mode: fast\n  server.pem: |\n" +
			pemBlock("RSA PRIVATE KEY", "    ", pemKeyLines) + "  server.crt: |\n" + pemBlock("CERTIFICATE", "    ", pemCertLines))},
		"app/quoted.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tls\ndata:\n  server.pem: " + quoted + "\n  mode: fast\n")},
		"app/deploy.yaml": {Data: []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n" +
			"        env:\n        - name: CERT_BUNDLE\n          value: |\n" + pemBlock("PRIVATE KEY", "            ", pemKeyLines) + "        - name: MODE\n          value: fast\n")},
		"app/issuer.yaml": {Data: []byte("apiVersion: example.com/v1\nkind: Issuer\nmetadata:\n  name: ca\nspec:\n  ca:\n    material: |\n" +
			pemBlock("ENCRYPTED PRIVATE KEY", "      ", pemKeyLines) + "    mode: fast\n")},
		"charts/web/Chart.yaml":  {Data: []byte("apiVersion: v2\nname: web\nversion: 1.0.0\n")},
		"charts/web/values.yaml": {Data: []byte("tls:\n  pem: |\n" + pemBlock("PRIVATE KEY", "    ", pemKeyLines) + "  mode: fast\n")},
		"certs/server.key":       {Data: []byte(pemBlock("OPENSSH PRIVATE KEY", "", pemKeyLines))},
		"certs/bundle.pem":       {Data: []byte(pemBlock("CERTIFICATE", "", pemCertLines) + pemBlock("PGP PRIVATE KEY BLOCK", "", pemKeyLines))},
		"certs/ca.crt":           {Data: []byte(pemBlock("CERTIFICATE", "", pemCertLines) + pemBlock("PUBLIC KEY", "", pemCertLines))},
	}
	for name, tc := range map[string]struct {
		file string
		kept []string
	}{
		"a ConfigMap's block scalar":        {"app/config.yaml", []string{"mode: fast", "  server.pem: [redacted]\n", "-----BEGIN CERTIFICATE-----", pemCertLines[0]}},
		"a ConfigMap's quoted scalar":       {"app/quoted.yaml", []string{"  server.pem: [redacted]\n", "mode: fast"}},
		"an env value":                      {"app/deploy.yaml", []string{"value: fast"}},
		"a custom resource's field":         {"app/issuer.yaml", []string{"mode: fast"}},
		"a Helm values file":                {"charts/web/values.yaml", []string{"  pem: [redacted]\n", "mode: fast"}},
		"a key file":                        {"certs/server.key", []string{"[redacted]\n"}},
		"a certificate and a key in a file": {"certs/bundle.pem", []string{"-----BEGIN CERTIFICATE-----\n", pemCertLines[1]}},
		"a certificate and a public key":    {"certs/ca.crt", []string{"-----BEGIN CERTIFICATE-----\n", "-----BEGIN PUBLIC KEY-----\n", pemCertLines[0], pemCertLines[1]}},
	} {
		t.Run(name, func(t *testing.T) {
			hidden := pemKeyLines
			if tc.file == "certs/ca.crt" {
				hidden = nil
			}
			requireMaskedFile(t, fsys, tc.file, hidden, tc.kept, nil)
		})
	}
}

// TestMaskedManifestsHidePrivateKeys: an object's private key is masked
// whatever key holds it, in a ConfigMap, an env value and a custom resource,
// and so is one a change request sets in an env value; a certificate is shown.
func TestMaskedManifestsHidePrivateKeys(t *testing.T) {
	key, cert := pemBlock("RSA PRIVATE KEY", "", pemKeyLines), pemBlock("CERTIFICATE", "", pemCertLines)
	objs := []Object{
		{Manifest: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "tls"},
			"data": map[string]any{"server.pem": key, "server.crt": cert, "mode": "fast"}}},
		{Manifest: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
				"name": "web", "env": []any{map[string]any{"name": "CERT_BUNDLE", "value": key}}}}}}}}},
		{Manifest: map[string]any{"apiVersion": "example.com/v1", "kind": "Issuer", "metadata": map[string]any{"name": "ca"},
			"spec": map[string]any{"ca": map[string]any{"material": key}}}},
	}
	got, err := MaskedManifests(objs)
	if err != nil {
		t.Fatal(err)
	}
	requireNoSecret(t, "masked manifests", got, pemKeyLines)
	for _, kept := range []string{"server.pem: '[redacted]'", "material: '[redacted]'", pemCertLines[0], "mode: fast"} {
		if !strings.Contains(got, kept) {
			t.Errorf("masked manifests lack %q:\n%s", kept, got)
		}
	}
	change := MaskedChange("apps/v1", "Deployment", map[string]any{"env": map[string]any{"set": map[string]any{"CERT_BUNDLE": key, "MODE": "fast"}}})
	if set := change["env"].(map[string]any)["set"].(map[string]any); set["CERT_BUNDLE"] != redacted || set["MODE"] != "fast" {
		t.Errorf("masked change's env: %v", set)
	}
}

// TestDiffHidesAPrivateKeyInItsContext: a git diff of an edit beside a
// ConfigMap's private key shows the key's lines masked, on both sides.
func TestDiffHidesAPrivateKeyInItsContext(t *testing.T) {
	old := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tls\ndata:\n  mode: fast\n  server.pem: |\n" + pemBlock("PRIVATE KEY", "    ", pemKeyLines)
	next := strings.Replace(old, "mode: fast", "mode: slow", 1)
	out := gitDiff([]FileEdit{{Path: "app/config.yaml", Old: []byte(old), New: []byte(next)}}, nil)
	requireNoSecret(t, "the diff", out, pemKeyLines)
	for _, w := range []string{"-  mode: fast\n", "+  mode: slow\n", "   server.pem: [redacted]\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("diff lacks %q:\n%s", w, out)
		}
	}
}

// TestPrivateKeysAreScrubbedFromFreeText: a message quoting a private key, or
// a line of it, read from a file or an object, shows it scrubbed; a
// certificate's lines stay.
func TestPrivateKeysAreScrubbedFromFreeText(t *testing.T) {
	key := pemBlock("RSA PRIVATE KEY", "", pemKeyLines)
	bundled := []string{"kkBundleKeyLine0001xyz"}
	msg := "invalid value " + key + " near " + pemKeyLines[1] + " after " + pemCertLines[0] + ", bad " + bundled[0]
	s := treeScrubber(t, map[string]string{
		"app/config.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tls\ndata:\n  server.pem: \"" + strings.ReplaceAll(key, "\n", "\\n") + "\"\n",
		"certs/bundle.pem": pemBlock("CERTIFICATE", "", pemCertLines) + pemBlock("OPENSSH PRIVATE KEY", "", bundled),
	})
	got := s.text(msg)
	requireNoSecret(t, "scrubbed text", got, append(bundled, pemKeyLines...))
	if !strings.Contains(got, pemCertLines[0]) {
		t.Errorf("scrubbing removed a certificate's line: %q", got)
	}
	cm := ChangedObject{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"server.pem": key, "server.crt": pemBlock("CERTIFICATE", "", pemCertLines)}}}
	got = MaskText([]ChangedObject{cm}, msg)
	requireNoSecret(t, "masked text", got, pemKeyLines)
	if !strings.Contains(got, pemCertLines[0]) {
		t.Errorf("masked text lost a certificate's line: %q", got)
	}
}

// TestEncodedPrivateKeysAreMasked: a private key written in base64 (a
// kubeconfig's client-key-data, a ConfigMap's binaryData) is masked and
// scrubbed as the key itself is; a certificate in base64 beside it stays shown
// (failed before: both were shown).
func TestEncodedPrivateKeysAreMasked(t *testing.T) {
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	key, cert := enc(pemBlock("RSA PRIVATE KEY", "", pemKeyLines)), enc(pemBlock("CERTIFICATE", "", pemCertLines))
	fsys := fstest.MapFS{
		"clusters/kubeconfig.yaml": {Data: []byte("apiVersion: v1\nkind: Config\nusers:\n- name: deployer\n  user:\n    client-certificate-data: " + cert +
			"\n    client-key-data: " + key + "\n")},
	}
	requireMaskedFile(t, fsys, "clusters/kubeconfig.yaml", []string{key}, []string{"client-certificate-data: " + cert, "client-key-data: [redacted]\n"}, nil)
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "tls"},
		"binaryData": map[string]any{"server.pem": key, "server.crt": cert}}
	got, err := MaskedManifests([]Object{{Manifest: cm}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, key) || !strings.Contains(got, cert) {
		t.Errorf("masked manifests, want the key hidden and the certificate shown:\n%s", got)
	}
	msg := "bad data " + key + " or " + pemKeyLines[0] + " beside " + cert
	for what, s := range map[string]string{
		"scrubbed text": treeScrubber(t, map[string]string{"clusters/kubeconfig.yaml": string(fsys["clusters/kubeconfig.yaml"].Data)}).text(msg),
		"masked text":   MaskText([]ChangedObject{{Object: cm}}, msg),
	} {
		if strings.Contains(s, key) || strings.Contains(s, pemKeyLines[0]) || !strings.Contains(s, cert) {
			t.Errorf("%s, want the key hidden and the certificate shown: %q", what, s)
		}
	}
}

// TestEncodedPrivateKeysAreMaskedWhateverPrecedesThem: a private key in
// base64 is found wherever its block starts in what the base64 decodes to
// (openssl's export of a key writes "Bag Attributes" lines before it), and in
// a file that holds nothing but the base64 (a key file of a kubeconfig's
// client-key-data); it is masked, and scrubbed from free text (failed before:
// both were shown, and a message quoting either kept it).
func TestEncodedPrivateKeysAreMaskedWhateverPrecedesThem(t *testing.T) {
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	exported := enc("Bag Attributes\n    localKeyID: 01 00 00 00\nKey Attributes: <No Attributes>\n" + pemBlock("PRIVATE KEY", "", pemKeyLines))
	bare := enc(pemBlock("EC PRIVATE KEY", "", pemKeyLines))
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tls\nbinaryData:\n  server.pem: " + exported + "\n  mode: ZmFzdA==\n"
	fsys := fstest.MapFS{
		"app/config.yaml":    {Data: []byte(cm)},
		"certs/client.key64": {Data: []byte(bare + "\n")},
	}
	requireMaskedFile(t, fsys, "app/config.yaml", []string{exported}, []string{"  server.pem: [redacted]\n", "mode: ZmFzdA=="}, nil)
	requireMaskedFile(t, fsys, "certs/client.key64", []string{bare}, nil, nil)
	obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "tls"},
		"binaryData": map[string]any{"server.pem": exported, "mode": "ZmFzdA=="}}
	got, err := MaskedManifests([]Object{{Manifest: obj}})
	if err != nil {
		t.Fatal(err)
	}
	requireNoSecret(t, "masked manifests", got, []string{exported})
	if !strings.Contains(got, "ZmFzdA==") {
		t.Errorf("masked manifests hid an ordinary value:\n%s", got)
	}
	msg := "bad data " + exported + " or " + bare + " or " + pemKeyLines[0]
	for what, s := range map[string]string{
		"scrubbed text": treeScrubber(t, map[string]string{"app/config.yaml": cm, "certs/client.key64": bare + "\n"}).text(msg),
		"masked text":   MaskText([]ChangedObject{{Object: obj}}, "bad data "+exported+" or "+pemKeyLines[0]),
	} {
		requireNoSecret(t, what, s, []string{exported, bare, pemKeyLines[0]})
	}
}

// TestPrivateKeysInAnyBase64AreMasked: a private key in base64 without its
// padding, or in the URL-safe alphabet, is masked wherever it is (a values
// file's tls.pem, a kubeconfig's client-key-data, a key file), in masked
// manifests, and scrubbed from free text (failed before: only standard,
// padded base64 was decoded, and each of these was shown whole).
func TestPrivateKeysInAnyBase64AreMasked(t *testing.T) {
	key := pemBlock("PRIVATE KEY", "", pemKeyLines) + "comment: ???>>>!\n" // bytes whose base64 holds + and /, and needs padding
	urlSafe, unpadded := base64.RawURLEncoding.EncodeToString([]byte(key)), base64.RawStdEncoding.EncodeToString([]byte(key))
	padded := base64.URLEncoding.EncodeToString([]byte(key))
	if !strings.ContainsAny(urlSafe, "-_") || len(unpadded)%4 == 0 {
		t.Fatalf("the test's key encodes to no URL-safe or unpadded base64: %s, %s", urlSafe, unpadded)
	}
	files := map[string]string{
		"charts/web/Chart.yaml":    "apiVersion: v2\nname: web\nversion: 1.0.0\n",
		"charts/web/values.yaml":   "tls:\n  pem: " + urlSafe + "\n  padded: " + padded + "\nreplicaCount: 2\n",
		"clusters/kubeconfig.yaml": "apiVersion: v1\nkind: Config\nusers:\n- name: deployer\n  user:\n    client-key-data: " + unpadded + "\n",
		"certs/client.key64":       urlSafe + "\n",
	}
	fsys := fstest.MapFS{}
	for p, d := range files {
		fsys[p] = &fstest.MapFile{Data: []byte(d)}
	}
	hidden := []string{urlSafe, unpadded, padded}
	requireMaskedFile(t, fsys, "charts/web/values.yaml", hidden, []string{"  pem: [redacted]\n", "  padded: [redacted]\n", "replicaCount: 2"}, nil)
	requireMaskedFile(t, fsys, "clusters/kubeconfig.yaml", hidden, []string{"    client-key-data: [redacted]\n"}, nil)
	requireMaskedFile(t, fsys, "certs/client.key64", hidden, nil, nil)
	obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Tunnel", "metadata": map[string]any{"name": "edge"},
		"spec": map[string]any{"identity": urlSafe}}
	got, err := MaskedManifests([]Object{{Manifest: obj}})
	if err != nil {
		t.Fatal(err)
	}
	requireNoSecret(t, "masked manifests", got, hidden)
	msg := "bad data " + urlSafe + " or " + unpadded + " or " + pemKeyLines[0]
	requireNoSecret(t, "scrubbed text", treeScrubber(t, files).text(msg), append(hidden, pemKeyLines[0]))
	requireNoSecret(t, "masked text", MaskText([]ChangedObject{{Object: obj}}, msg), []string{urlSafe, pemKeyLines[0]})
}
