package kube_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kukie/kukie-gitops/kube"
)

// FuzzLoadKubeconfig checks what LoadKubeconfigWith promises of any document a
// team gives: it never panics, a refusal says something, and an accepted config
// holds nothing that runs code, reads a file or reaches a proxy, names only https
// servers, skips TLS verification only where the operator allowed it, and loads
// again to itself once written out (so what is stored is what was checked).
func FuzzLoadKubeconfig(f *testing.F) {
	f.Add([]byte(kubeconfigDoc("    server: https://k8s.example:6443\n    certificate-authority-data: Y2E=",
		"    token: abc")), false)
	f.Add([]byte(kubeconfigDoc("    server: https://k8s.example:6443\n    insecure-skip-tls-verify: true",
		"    username: u\n    password: p")), true)
	f.Add([]byte(kubeconfigDoc("    server: https://k8s.example", "    exec: {command: sh, apiVersion: client.authentication.k8s.io/v1}")), false)
	f.Add([]byte(kubeconfigDoc("    server: https://k8s.example", "    auth-provider: {name: gcp}")), false)
	f.Add([]byte(kubeconfigDoc("    server: https://k8s.example", "    tokenFile: /etc/shadow")), false)
	f.Add([]byte(kubeconfigDoc("    server: https://k8s.example\n    proxy-url: http://p", "    token: t")), false)
	f.Add([]byte(kubeconfigDoc("    server: https://169.254.169.254", "    token: t")), false)
	f.Add([]byte(kubeconfigDoc("    sever: https://k8s.example", "    tokne: t")), false)
	f.Add([]byte(`{"clusters":[{"name":"a","cluster":{"server":"https://[::1]:6443/x"}}],"users":[{"name":"u","user":{"as":"x","as-groups":["g"]}}]}`), false)
	f.Add([]byte("users:\n- name: u\n  user: null\nclusters:\n- name: c\n  cluster: {server: 'https://a'}\ncontexts:\n- name: x\n  context: null\n"), false)
	f.Add([]byte("a: &a [*a]"), false)
	f.Add([]byte(""), false)
	f.Fuzz(func(t *testing.T, doc []byte, allowInsecure bool) {
		opts := kube.KubeconfigOptions{AllowInsecureTLS: allowInsecure}
		cfg, warnings, err := kube.LoadKubeconfigWith(doc, opts)
		if err != nil {
			if cfg != nil || warnings != nil {
				t.Fatalf("refused with a config or warnings: %v", err)
			}
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("refused without a reason")
			}
			var ke *kube.KubeconfigError
			if errors.As(err, &ke) && (ke.Field == "" || ke.Reason == "") {
				t.Fatalf("refusal without its setting or its reason: %#v", ke)
			}
			return
		}
		checkOnlyInline(t, cfg, allowInsecure)
		if len(warnings) > 0 && !allowInsecure {
			t.Fatalf("warnings without anything allowed: %q", warnings)
		}
		written, err := clientcmd.Write(*cfg)
		if err != nil {
			t.Fatalf("write accepted config: %v", err)
		}
		again, _, err := kube.LoadKubeconfigWith(written, opts)
		if err != nil {
			t.Fatalf("accepted config refused once written out: %v\n%s", err, written)
		}
		if !reflect.DeepEqual(withoutOrigins(again), withoutOrigins(cfg)) {
			t.Fatalf("accepted config changed once written out and loaded:\n%s", written)
		}
	})
}

// checkOnlyInline fails t if cfg holds a setting LoadKubeconfig refuses.
func checkOnlyInline(t *testing.T, cfg *clientcmdapi.Config, allowInsecure bool) {
	t.Helper()
	for name, u := range cfg.AuthInfos {
		if u == nil {
			t.Fatalf("user %q is nil", name)
		}
		if u.Exec != nil || u.AuthProvider != nil || u.TokenFile != "" || u.ClientCertificate != "" || u.ClientKey != "" {
			t.Fatalf("user %q accepted with a plugin or a file: %#v", name, u)
		}
		if len(u.Extensions) > 0 {
			t.Fatalf("user %q kept its extensions", name)
		}
	}
	for name, c := range cfg.Clusters {
		if c == nil {
			t.Fatalf("cluster %q is nil", name)
		}
		if c.CertificateAuthority != "" || c.ProxyURL != "" || len(c.Extensions) > 0 {
			t.Fatalf("cluster %q accepted with a file, a proxy or extensions: %#v", name, c)
		}
		if c.InsecureSkipTLSVerify && !allowInsecure {
			t.Fatalf("cluster %q accepted without TLS verification", name)
		}
		u, err := url.Parse(c.Server)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			t.Fatalf("cluster %q accepted with server %q", name, c.Server)
		}
	}
	if len(cfg.Extensions) > 0 || !reflect.DeepEqual(cfg.Preferences, clientcmdapi.Preferences{}) {
		t.Fatal("config kept its extensions or preferences")
	}
}

// withoutOrigins is cfg without the file each entry was read from, which only
// loading sets.
func withoutOrigins(cfg *clientcmdapi.Config) *clientcmdapi.Config {
	out := cfg.DeepCopy()
	for _, u := range out.AuthInfos {
		u.LocationOfOrigin = ""
	}
	for _, c := range out.Clusters {
		c.LocationOfOrigin = ""
	}
	for _, c := range out.Contexts {
		c.LocationOfOrigin = ""
	}
	return out
}

// FuzzKubeconfigRefusalsNeverShowCredentials gives the credentials and a setting
// of a kubeconfig any value, a server any URL and an extra field any name: a
// refusal goes back to the team and into the service's log, so it never holds
// the token, the password or the value of a field it does not know.
func FuzzKubeconfigRefusalsNeverShowCredentials(f *testing.F) {
	f.Add("https://k8s.example", "token", "abc", "p4ss", "")
	f.Add("https://k8s.example", "tokne", "abc", "p4ss", "s3cret")
	f.Add("https://u:pw@k8s.example", "token", "abc", "p4ss", "")
	f.Add("http://k8s.example?token=x", "client-key-data", "abc", "p4ss", "eA==")
	f.Add("https://k8s.example", "insecure-skip-tls-verify", "abc", "p4ss", "yes")
	f.Add("https:%zz", "as-user-extra", "abc", "p4ss", "x")
	f.Add("https://k8s.example", "client-certificate-data", "abc", "p4ss", "not base64")
	f.Fuzz(func(t *testing.T, server, field, token, password, value string) {
		const mark = "CREDENTIAL-"
		token, password, value = mark+"t"+token, mark+"p"+password, mark+"v"+value
		secrets := []string{token, password, value}
		for _, s := range secrets {
			// A server or field name may be shown; one that holds a piece of a
			// credential would make that piece look shown too.
			if sharesPiece(server, s) || sharesPiece(field, s) {
				return
			}
		}
		users := []map[string]any{{"name": "admin", "user": map[string]any{"token": token, "password": password, "username": "u"}}}
		user := users[0]["user"].(map[string]any)
		user[field] = value
		doc, err := json.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "Config",
			"clusters": []map[string]any{{"name": "prod", "cluster": map[string]any{"server": server}}},
			"users":    users,
		})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = kube.LoadKubeconfigWith(doc, kube.KubeconfigOptions{})
		if err == nil {
			return
		}
		for _, s := range secrets {
			if sharesPiece(err.Error(), s) {
				t.Fatalf("refusal shows a piece of the credential %q: %v", s, err)
			}
		}
	})
}

// credentialPiece is the length of the shortest piece of a credential a refusal
// may not hold: shorter ones are found in any text by chance.
const credentialPiece = 8

// sharesPiece reports whether text holds any credentialPiece bytes of secret in a
// row; a secret shorter than that is never found.
func sharesPiece(text, secret string) bool {
	for i := 0; i+credentialPiece <= len(secret); i++ {
		if strings.Contains(text, secret[i:i+credentialPiece]) {
			return true
		}
	}
	return false
}
