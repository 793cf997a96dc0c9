package kube_test

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
)

// kubeconfigDoc is a kubeconfig with one cluster, one user and a current context
// using both; cluster and user are the entries' bodies, indented by the caller's
// six spaces.
func kubeconfigDoc(cluster, user string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
%s
contexts:
- name: prod
  context: {cluster: prod, user: admin, namespace: shop}
current-context: prod
users:
- name: admin
  user:
%s
`, cluster, user)
}

const (
	inlineServer = "    server: https://prod.example:6443"
	inlineToken  = "    token: inline-token"
)

func TestLoadKubeconfigAcceptsInlineSettings(t *testing.T) {
	doc := []byte(`apiVersion: v1
kind: Config
preferences: {colors: true}
clusters:
- name: prod
  cluster:
    server: https://prod.example:6443
    certificate-authority-data: Y2EtZGF0YQ==
    tls-server-name: api.prod.example
    extensions:
    - name: tool
      extension: {note: ignored}
- name: stage
  cluster:
    server: https://stage.example:6443
    certificate-authority-data: c3RhZ2UtY2E=
contexts:
- name: prod
  context: {cluster: prod, user: cert, namespace: shop}
- name: stage
  context: {cluster: stage, user: basic}
current-context: prod
users:
- name: cert
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
- name: basic
  user:
    username: alice
    password: pw
    as: deployer
    as-groups: [deployers]
- name: bearer
  user:
    token: inline-token
`)
	cfg, err := kube.LoadKubeconfig(doc)
	if err != nil {
		t.Fatalf("an inline kubeconfig was refused: %v", err)
	}
	if cfg.CurrentContext != "prod" || len(cfg.Clusters) != 2 || len(cfg.AuthInfos) != 3 || len(cfg.Contexts) != 2 {
		t.Fatalf("config = %+v, want every entry kept", cfg)
	}
	if c := cfg.Clusters["prod"]; string(c.CertificateAuthorityData) != "ca-data" || c.TLSServerName != "api.prod.example" || len(c.Extensions) != 0 {
		t.Errorf("cluster prod = %+v, want its CA data and server name, without extensions", c)
	}
	if u := cfg.AuthInfos["cert"]; string(u.ClientCertificateData) != "cert" || string(u.ClientKeyData) != "key" {
		t.Errorf("user cert = %+v, want its certificate and key data", u)
	}
	if u := cfg.AuthInfos["basic"]; u.Username != "alice" || u.Password != "pw" || u.Impersonate != "deployer" || len(u.ImpersonateGroups) != 1 {
		t.Errorf("user basic = %+v, want basic credentials and impersonation", u)
	}
	if cfg.Contexts["prod"].Namespace != "shop" || cfg.Contexts["stage"].AuthInfo != "basic" {
		t.Errorf("contexts = %+v", cfg.Contexts)
	}
}

// TestLoadKubeconfigRefusesAServerAddressWrittenAsANumber: a server host written
// as a number, in hex or octal parts, or with a trailing dot is read by the
// system's resolver (getaddrinfo) as the address it spells and by Go's as a name
// to look up, so it is refused at registration, the reason naming the address it
// means and, for one the service never connects to, why (accepted before, and
// refused only when the service connected).
func TestLoadKubeconfigRefusesAServerAddressWrittenAsANumber(t *testing.T) {
	tests := map[string]struct{ server, want string }{
		"a metadata endpoint as one number": {"https://2852039166",
			"address 169.254.169.254 is link-local or unspecified"},
		"a metadata endpoint in hex parts": {"https://0xa9.0xfe.0xa9.0xfe:443",
			"address 169.254.169.254 is link-local or unspecified"},
		"a metadata endpoint in octal parts": {"https://0251.0376.0251.0376",
			"address 169.254.169.254 is link-local or unspecified"},
		"a metadata endpoint with a trailing dot": {"https://169.254.169.254.",
			"address 169.254.169.254 is link-local or unspecified"},
		"an allowed address as one number": {"https://2130706433:6443",
			"the server host 2130706433 means address 127.0.0.1; write it as 127.0.0.1"},
		"an allowed address in short form": {"https://10.1:6443",
			"the server host 10.1 means address 10.0.0.1; write it as 10.0.0.1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := kube.LoadKubeconfig(kubeconfigDoc("    server: "+tc.server, inlineToken))
			var refused *kube.KubeconfigError
			if !errors.As(err, &refused) {
				t.Fatalf("LoadKubeconfig = %v, want a *KubeconfigError", err)
			}
			if refused.Field != "clusters[prod].server" || !strings.Contains(refused.Reason, tc.want) {
				t.Errorf("refusal %q (field %q), want field clusters[prod].server saying %q", err, refused.Field, tc.want)
			}
		})
	}
	for _, server := range []string{"https://10.0.0.1:6443", "https://127.0.0.1:6443", "https://prod.example", "https://1.example:6443"} {
		if _, err := kube.LoadKubeconfig(kubeconfigDoc("    server: "+server, inlineToken)); err != nil {
			t.Errorf("LoadKubeconfig of server %s = %v, want it accepted", server, err)
		}
	}
}

func TestLoadKubeconfigRefusesAnythingButInlineSettings(t *testing.T) {
	tests := map[string]struct {
		doc       []byte
		wantField string
	}{
		"exec plugin": {doc: kubeconfigDoc(inlineServer, "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: id\n"),
			wantField: "users[admin].exec"},
		"auth provider": {doc: kubeconfigDoc(inlineServer, "    auth-provider:\n      name: oidc\n      config: {idp-issuer-url: https://idp.example}\n"),
			wantField: "users[admin].auth-provider"},
		"token file":              {doc: kubeconfigDoc(inlineServer, "    tokenFile: /etc/kukie/encryption.key"), wantField: "users[admin].tokenFile"},
		"client certificate file": {doc: kubeconfigDoc(inlineServer, "    client-certificate: /etc/ssl/cert.pem"), wantField: "users[admin].client-certificate"},
		"client key file":         {doc: kubeconfigDoc(inlineServer, "    client-key: /etc/ssl/key.pem"), wantField: "users[admin].client-key"},
		"certificate authority file": {doc: kubeconfigDoc(inlineServer+"\n    certificate-authority: /etc/ssl/ca.pem", inlineToken),
			wantField: "clusters[prod].certificate-authority"},
		"proxy":             {doc: kubeconfigDoc(inlineServer+"\n    proxy-url: socks5://10.0.0.1:1080", inlineToken), wantField: "clusters[prod].proxy-url"},
		"plain http server": {doc: kubeconfigDoc("    server: http://prod.example:8080", inlineToken), wantField: "clusters[prod].server"},
		"unix socket":       {doc: kubeconfigDoc("    server: unix:///var/run/docker.sock", inlineToken), wantField: "clusters[prod].server"},
		"no server":         {doc: kubeconfigDoc("    certificate-authority-data: Y2EtZGF0YQ==", inlineToken), wantField: "clusters[prod].server"},
		"credentials in the server URL": {doc: kubeconfigDoc("    server: https://alice:pw@prod.example", inlineToken),
			wantField: "clusters[prod].server"},
		"a cloud metadata endpoint": {doc: kubeconfigDoc("    server: https://169.254.169.254", inlineToken), wantField: "clusters[prod].server"},
		"AWS's IPv6 metadata endpoint": {doc: kubeconfigDoc("    server: https://[fd00:ec2::254]:443", inlineToken),
			wantField: "clusters[prod].server"},
		"a metadata endpoint inside an IPv6 address": {doc: kubeconfigDoc("    server: https://[::ffff:169.254.169.254]", inlineToken),
			wantField: "clusters[prod].server"},
		// The current context's user is inline; another user of the same document is
		// not, and the document is stored whole.
		"exec in a user no context selects": {doc: append(kubeconfigDoc(inlineServer, inlineToken),
			"- name: spare\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: id\n"...),
			wantField: "users[spare].exec"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := kube.LoadKubeconfig(tc.doc)
			var refused *kube.KubeconfigError
			if !errors.As(err, &refused) {
				t.Fatalf("LoadKubeconfig = %v, want a *KubeconfigError", err)
			}
			if refused.Field != tc.wantField || refused.Reason == "" || !strings.HasPrefix(err.Error(), tc.wantField+": ") {
				t.Errorf("refusal %q (field %q), want field %q with a reason", err, refused.Field, tc.wantField)
			}
		})
	}
	if _, err := kube.LoadKubeconfig([]byte("clusters: [")); err == nil || !strings.Contains(err.Error(), "parse kubeconfig") {
		t.Errorf("LoadKubeconfig of broken YAML = %v, want a parse error", err)
	}
	// A kubeconfig is untrusted input: an alias bomb of a few hundred bytes (9^9
	// strings once expanded) is refused by the decoder, not expanded.
	bomb := "apiVersion: v1\nkind: Config\na: &a [x, x, x, x, x, x, x, x, x]\n"
	for _, name := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		prev := string(rune(name[0] - 1))
		bomb += fmt.Sprintf("%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", name, name, prev, prev, prev, prev, prev, prev, prev, prev, prev)
	}
	if _, err := kube.LoadKubeconfig([]byte(bomb)); err == nil || !strings.Contains(err.Error(), "excessive aliasing") {
		t.Errorf("LoadKubeconfig of an alias bomb = %v, want it refused", err)
	}
}

// apiServer is a TLS server standing in for a team's API server: it answers every
// request 403 and records the Authorization headers it was sent.
type apiServer struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string
}

func newAPIServer(t *testing.T) *apiServer {
	s := &apiServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`, http.StatusForbidden)
	}))
	t.Cleanup(s.Close)
	return s
}

// caData is the certificate-authority-data of a kubeconfig for srv: its
// certificate, which is its own CA.
func caData(srv *httptest.Server) string {
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
}

func (s *apiServer) authorizations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

// TestStoredKubeconfigNeverRunsPluginsOrReadsFiles: a kubeconfig stored before the
// registration check existed is refused when it is used. Its exec plugin would
// create a marker file, and its token file is a file of the service's own; neither
// may be run or read, and nothing of them may reach the team's server.
func TestStoredKubeconfigNeverRunsPluginsOrReadsFiles(t *testing.T) {
	tests := map[string]struct {
		user      func(marker, ownSecret, credential string) string
		wantField string
	}{
		"exec plugin": {
			user: func(marker, _, credential string) string {
				return fmt.Sprintf("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n"+
					"      command: /bin/sh\n      args: [\"-c\", \"touch %s && cat %s\"]", marker, credential)
			},
			wantField: "users[admin].exec",
		},
		"token file": {
			user:      func(_, ownSecret, _ string) string { return "    tokenFile: " + ownSecret },
			wantField: "users[admin].tokenFile",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			marker, ownSecret, credential := filepath.Join(dir, "plugin-ran"), filepath.Join(dir, "encryption.key"), filepath.Join(dir, "credential.json")
			if err := os.WriteFile(ownSecret, []byte("service-own-secret"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(credential, []byte(`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-plugin"}}`), 0o600); err != nil {
				t.Fatal(err)
			}
			srv := newAPIServer(t)
			doc := kubeconfigDoc("    server: "+srv.URL+"\n    certificate-authority-data: "+caData(srv.Server), tc.user(marker, ownSecret, credential))

			c, err := kube.NewClusters(kube.Options{}).Get("cluster-id-1234", kube.Access{Kubeconfig: doc})
			if err == nil {
				// What an unchecked kubeconfig leads to: the next read runs the plugin
				// or sends the file's content.
				_, err = c.ListApplications(context.Background(), kube.Refresh)
				t.Errorf("a kubeconfig with %s was accepted for use (the read then returned %v)", tc.wantField, err)
			} else if !strings.Contains(err.Error(), tc.wantField) || strings.Contains(err.Error(), "cluster-id-1234") {
				t.Errorf("Get error = %v, want one naming %s and not the registry's key", err, tc.wantField)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the exec plugin ran (marker file: %v)", err)
			}
			for _, a := range srv.authorizations() {
				if strings.Contains(a, "service-own-secret") || strings.Contains(a, "from-plugin") {
					t.Errorf("the team's server was sent %q", a)
				}
			}
		})
	}
}

// TestInsecureTLSIsRefusedUnlessTheOperatorAllowsIt: insecure-skip-tls-verify, in
// any cluster entry, is refused naming it and saying to give
// certificate-authority-data, at registration (LoadKubeconfig) and at use (a
// kubeconfig stored before: nothing is sent to its server); allowed by the
// operator, it is accepted with a warning naming it, and used.
func TestInsecureTLSIsRefusedUnlessTheOperatorAllowsIt(t *testing.T) {
	srv := newAPIServer(t)
	insecure := kubeconfigDoc("    server: "+srv.URL+"\n    insecure-skip-tls-verify: true", inlineToken)
	// The current context's cluster is verified; another of the document is not.
	spare := kubeconfigDoc("    server: "+srv.URL+"\n    certificate-authority-data: "+caData(srv.Server)+
		"\n- name: spare\n  cluster:\n    server: https://spare.example\n    insecure-skip-tls-verify: true", inlineToken)
	for doc, field := range map[string]string{string(insecure): "clusters[prod].insecure-skip-tls-verify", string(spare): "clusters[spare].insecure-skip-tls-verify"} {
		_, err := kube.LoadKubeconfig([]byte(doc))
		var refused *kube.KubeconfigError
		if !errors.As(err, &refused) || refused.Field != field ||
			!strings.Contains(refused.Reason, "certificate-authority-data") || !strings.Contains(refused.Reason, "clusters.allow_insecure_tls") {
			t.Errorf("LoadKubeconfig = %v, want a *KubeconfigError naming %s, certificate-authority-data and the setting", err, field)
		}
		cfg, warnings, err := kube.LoadKubeconfigWith([]byte(doc), kube.KubeconfigOptions{AllowInsecureTLS: true})
		if err != nil || cfg == nil || len(warnings) != 1 || !strings.HasPrefix(warnings[0], field+": ") || !strings.Contains(warnings[0], "certificate-authority-data") {
			t.Errorf("allowed: %v, warnings %q, want accepted with one warning naming %s", err, warnings, field)
		}
	}
	if _, warnings, err := kube.LoadKubeconfigWith(kubeconfigDoc("    server: "+srv.URL+"\n    certificate-authority-data: "+caData(srv.Server), inlineToken),
		kube.KubeconfigOptions{AllowInsecureTLS: true}); err != nil || len(warnings) != 0 {
		t.Errorf("a verified kubeconfig: %v, warnings %q, want none", err, warnings)
	}

	if _, err := kube.NewClusters(kube.Options{}).Get("stored", kube.Access{Kubeconfig: insecure}); err == nil ||
		!strings.Contains(err.Error(), "kubeconfig refused: clusters[prod].insecure-skip-tls-verify") {
		t.Errorf("a stored insecure kubeconfig at use: %v, want refused naming the setting", err)
	}
	if got := srv.authorizations(); len(got) != 0 {
		t.Fatalf("the server of a refused kubeconfig was sent %q", got)
	}
	c, err := kube.NewClusters(kube.Options{}).Get("allowed", kube.Access{Kubeconfig: insecure, AllowInsecureTLS: true})
	if err != nil {
		t.Fatalf("allowed by the operator, at use: %v", err)
	}
	if _, err := c.ListApplications(context.Background(), kube.Fresh); kube.ClassOf(err) != argocd.FailureForbidden {
		t.Errorf("read through unverified TLS: %v, want the server's 403", err)
	}
	if got := srv.authorizations(); len(got) == 0 || got[0] != "Bearer inline-token" {
		t.Errorf("the server was sent %q, want the token over the allowed connection", got)
	}
}

// TestLoadKubeconfigRefusesUnknownFields: a field kubeconfigs do not have (a
// misspelt setting, which client-go ignores) is refused naming the entry that
// holds it and the field, with the setting it likely is; never with a value, nor
// with a name that is no setting's, which may be a credential pasted as a key.
// At use too, as every check of the document is.
func TestLoadKubeconfigRefusesUnknownFields(t *testing.T) {
	const secret = "s3cret-credential-value"
	tests := map[string]struct {
		doc                  []byte
		wantField, wantInErr string
	}{
		"a misspelt token": {doc: kubeconfigDoc(inlineServer, "    tokn: "+secret),
			wantField: "users[admin].user", wantInErr: `unknown field "tokn" (did you mean "token"?)`},
		"a misspelt certificate-authority-data": {doc: kubeconfigDoc(inlineServer+"\n    certificate-authority-dat: "+secret, inlineToken),
			wantField: "clusters[prod].cluster", wantInErr: `unknown field "certificate-authority-dat" (did you mean "certificate-authority-data"?)`},
		"a misspelt server": {doc: kubeconfigDoc("    sever: https://prod.example:6443", inlineToken),
			wantField: "clusters[prod].cluster", wantInErr: `unknown field "sever" (did you mean "server"?)`},
		"a setting in another case": {doc: kubeconfigDoc(inlineServer, "    Token: "+secret),
			wantField: "users[admin].user", wantInErr: `unknown field "Token" (did you mean "token"?)`},
		"a misspelt namespace": {doc: []byte(strings.Replace(string(kubeconfigDoc(inlineServer, inlineToken)), "namespace: shop", "namspace: shop", 1)),
			wantField: "contexts[prod].context", wantInErr: `unknown field "namspace" (did you mean "namespace"?)`},
		"a misspelt list": {doc: append(kubeconfigDoc(inlineServer, inlineToken), "user:\n- name: ci\n  user: {token: "+secret+"}\n"...),
			wantField: "top level", wantInErr: `unknown field "user" (did you mean "users"?)`},
		"a misspelt entry body": {doc: append(kubeconfigDoc(inlineServer, inlineToken), "- name: ci\n  usr: {token: "+secret+"}\n"...),
			wantField: "users[ci]", wantInErr: `unknown field "usr" (did you mean "user"?)`},
		"a misspelt preference": {doc: append(kubeconfigDoc(inlineServer, inlineToken), "preferences: {colours: true}\n"...),
			wantField: "preferences", wantInErr: `unknown field "colours" (did you mean "colors"?)`},
		"a field far from any": {doc: kubeconfigDoc(inlineServer, inlineToken+"\n    role: admin"),
			wantField: "users[admin].user", wantInErr: `unknown field "role"; the fields here are as, as-groups`},
		"a credential pasted as a key": {doc: kubeconfigDoc(inlineServer, "    "+secret+".eyJzdWIiOiJjaSJ9: x"),
			wantField: "users[admin].user", wantInErr: "its name is not shown"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := kube.LoadKubeconfig(tc.doc)
			var refused *kube.KubeconfigError
			if !errors.As(err, &refused) {
				t.Fatalf("LoadKubeconfig = %v, want a *KubeconfigError", err)
			}
			if refused.Field != tc.wantField || !strings.Contains(err.Error(), tc.wantInErr) {
				t.Errorf("refusal %q (field %q), want field %q saying %q", err, refused.Field, tc.wantField, tc.wantInErr)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("refusal %q shows the credential", err)
			}
		})
	}
	_, err := kube.NewClusters(kube.Options{}).Get("stored", kube.Access{Kubeconfig: kubeconfigDoc(inlineServer, "    tokn: "+secret)})
	if want := `kubeconfig refused: users[admin].user: unknown field "tokn"`; err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), secret) {
		t.Errorf("a stored kubeconfig with a misspelt token at use: %v, want %s", err, want)
	}
}

// TestLoadKubeconfigAcceptsWhatKubeconfigsHold: the fields of kubeconfigs as tools
// write them are known ones (preferences, extensions at each level, a context's
// namespace, tls-server-name, disable-compression, insecure-skip-tls-verify where
// allowed), in YAML and in JSON; proxy-url is refused for what it is, not as an
// unknown field.
func TestLoadKubeconfigAcceptsWhatKubeconfigsHold(t *testing.T) {
	doc := `apiVersion: v1
kind: Config
preferences: {}
clusters:
- name: minikube
  cluster:
    certificate-authority-data: Y2EtZGF0YQ==
    extensions:
    - extension:
        last-update: Tue, 01 Dec 2026 10:00:00 UTC
        provider: minikube.sigs.k8s.io
        version: v1.36.0
      name: cluster_info
    server: https://192.168.49.2:8443
    tls-server-name: api.minikube.internal
    disable-compression: true
- name: lab
  cluster:
    server: https://lab.example:6443
    insecure-skip-tls-verify: true
contexts:
- name: minikube
  context:
    cluster: minikube
    extensions:
    - extension: {provider: minikube.sigs.k8s.io}
      name: context_info
    namespace: default
    user: minikube
- name: lab
  context: {cluster: lab, user: ci}
current-context: minikube
users:
- name: minikube
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
    extensions:
    - name: note
      extension: {any: [thing, at, all]}
- name: ci
  user:
    token: inline-token
    as: deployer
    as-uid: "1001"
    as-groups: [deployers]
    as-user-extra: {scopes: [view]}
extensions:
- name: tool
  extension: {written-by: kubectl}
`
	cfg, warnings, err := kube.LoadKubeconfigWith([]byte(doc), kube.KubeconfigOptions{AllowInsecureTLS: true})
	if err != nil || len(warnings) != 1 {
		t.Fatalf("a kubeconfig as tools write it: %v, warnings %q", err, warnings)
	}
	if c := cfg.Clusters["minikube"]; c.TLSServerName != "api.minikube.internal" || !c.DisableCompression || cfg.Contexts["minikube"].Namespace != "default" {
		t.Errorf("cluster %+v, context %+v, want their settings kept", c, cfg.Contexts["minikube"])
	}
	asJSON, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := kube.LoadKubeconfigWith(asJSON, kube.KubeconfigOptions{AllowInsecureTLS: true}); err != nil {
		t.Errorf("the same kubeconfig in JSON: %v", err)
	}
	_, err = kube.LoadKubeconfig(kubeconfigDoc(inlineServer+"\n    proxy-url: https://proxy.example:3128", inlineToken))
	var refused *kube.KubeconfigError
	if !errors.As(err, &refused) || refused.Field != "clusters[prod].proxy-url" || strings.Contains(err.Error(), "unknown field") {
		t.Errorf("proxy-url: %v, want refused as a proxy", err)
	}
}

// TestServerURLRefusalsDoNotShowItsCredentials: a server URL refused for its form
// is named in the refusal, which the team's API answer and the service's log carry,
// without the password or query token it holds; one that carries credentials or a
// query is refused for that whatever its scheme, since client-go would drop them.
func TestServerURLRefusalsDoNotShowItsCredentials(t *testing.T) {
	const credential = "hunter2-credential"
	tests := map[string]struct{ server, wantInErr string }{
		"credentials in a plain http URL": {"http://alice:" + credential + "@prod.example:8080", "must not carry credentials"},
		"credentials in another scheme":   {"ftp://alice:" + credential + "@prod.example", "must not carry credentials"},
		"credentials in an opaque URL":    {"https:alice:" + credential + "@prod.example", "not an https:// URL"},
		"a token in the query":            {"https://prod.example:6443?access_token=" + credential, "must not carry a query"},
		"a token in the query of http":    {"http://prod.example?access_token=" + credential, "must not carry a query"},
		"a token in the fragment":         {"https://prod.example#" + credential, "must not carry a query"},
		"a URL that does not parse":       {"https://alice:" + credential + "@prod.example/%zz", "does not parse"},
		"plain http named without secret": {"http://prod.example:8080", `"http://prod.example:8080" is not an https:// URL`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := kube.LoadKubeconfig(kubeconfigDoc("    server: "+tc.server, inlineToken))
			var refused *kube.KubeconfigError
			if !errors.As(err, &refused) || refused.Field != "clusters[prod].server" {
				t.Fatalf("LoadKubeconfig = %v, want a *KubeconfigError naming clusters[prod].server", err)
			}
			if strings.Contains(err.Error(), credential) {
				t.Errorf("refusal %q shows the credential", err)
			}
			if !strings.Contains(err.Error(), tc.wantInErr) {
				t.Errorf("refusal %q, want it saying %q", err, tc.wantInErr)
			}
		})
	}
}

// TestDuplicateEntriesAreRefusedWithoutTheirCredentials: two entries of one name
// (a user pasted twice, the second from another tool) are refused naming the list
// and the name; client-go's decoder refuses them too, printing both entries whole,
// token, password and key bytes, into a text the team's answer and the log carry.
func TestDuplicateEntriesAreRefusedWithoutTheirCredentials(t *testing.T) {
	const token, password, key = "s3cret-token-value", "hunter2-password", "private-key-bytes"
	keyData := base64.StdEncoding.EncodeToString([]byte(key))
	keyBytes := fmt.Sprint([]byte(key)) // how the decoder prints client-key-data
	twice := func(list, first, second string) []byte {
		doc := string(kubeconfigDoc(inlineServer, "    token: "+token+"\n    client-key-data: "+keyData))
		return []byte(strings.Replace(doc, list+":\n", list+":\n"+first+second, 1))
	}
	tests := map[string]struct {
		doc       []byte
		wantField string
	}{
		"a user": {doc: twice("users", "- name: admin\n  user: {username: ci, password: "+password+"}\n", ""),
			wantField: "users[admin]"},
		"a cluster": {doc: twice("clusters", "- name: prod\n  cluster: {server: \"https://alice:"+password+"@prod.example\"}\n", ""),
			wantField: "clusters[prod]"},
		"a context": {doc: twice("contexts", "- name: prod\n  context: {cluster: prod, user: admin}\n", ""),
			wantField: "contexts[prod]"},
		"an extension of a user": {doc: []byte(strings.Replace(string(kubeconfigDoc(inlineServer, inlineToken)), "  user:\n",
			"  user:\n    extensions:\n    - {name: tool, extension: {token: "+token+"}}\n    - {name: tool, extension: {password: "+password+"}}\n", 1)),
			wantField: "users[admin].user.extensions[tool]"},
		"a user in JSON": {doc: []byte(`{"apiVersion":"v1","kind":"Config","current-context":"prod",
			"clusters":[{"name":"prod","cluster":{"server":"https://prod.example:6443"}}],
			"contexts":[{"name":"prod","context":{"cluster":"prod","user":"admin"}}],
			"users":[{"name":"admin","user":{"token":"` + token + `"}},{"name":"admin","user":{"password":"` + password + `","client-key-data":"` + keyData + `"}}]}`),
			wantField: "users[admin]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := kube.LoadKubeconfig(tc.doc)
			var refused *kube.KubeconfigError
			if !errors.As(err, &refused) || refused.Field != tc.wantField || !strings.Contains(err.Error(), "more than one entry") {
				t.Fatalf("LoadKubeconfig = %v, want a *KubeconfigError naming %s as more than one entry", err, tc.wantField)
			}
			for _, credential := range []string{token, password, key, keyData, keyBytes} {
				if strings.Contains(err.Error(), credential) {
					t.Errorf("refusal %q shows the credential %q", err, credential)
				}
			}
		})
	}
}

// TestAPIServerRedirectsAreNotFollowed: a team's API server, reached over TLS it
// proves, that answers with a redirect would have the service follow it, with the
// team's token, to any address the redirect names: plain http, which the server URL
// may not be, sending the credentials in clear, to this host's own services or
// another host's. No redirect is followed, for every read of the cluster, and the
// refusal says so without the address's query.
func TestAPIServerRedirectsAreNotFollowed(t *testing.T) {
	var reached sync.Mutex
	var sent []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Lock()
		sent = append(sent, r.Header.Get("Authorization")+" "+r.URL.String())
		reached.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"List","apiVersion":"v1","items":[]}`))
	}))
	t.Cleanup(elsewhere.Close)
	for name, status := range map[string]int{"found": http.StatusFound, "temporary": http.StatusTemporaryRedirect, "permanent": http.StatusPermanentRedirect} {
		t.Run(name, func(t *testing.T) {
			team := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, elsewhere.URL+"/admin/config_dump?token=s3cret-query", status)
			}))
			t.Cleanup(team.Close)
			doc := kubeconfigDoc("    server: "+team.URL+"\n    certificate-authority-data: "+caData(team), inlineToken)
			c, err := kube.NewClusters(kube.Options{}).Get("redirecting", kube.Access{Kubeconfig: doc})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.ListApplications(context.Background(), kube.Refresh)
			if err == nil || !strings.Contains(err.Error(), "redirect") {
				t.Errorf("ListApplications from a redirecting server = %v, want a refusal of the redirect", err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret-query") {
				t.Errorf("the refusal %q shows the redirect's query", err)
			}
			if _, err := c.Capabilities(context.Background(), kube.Refresh); err == nil {
				t.Errorf("the cluster's capabilities were read through the redirect")
			}
		})
	}
	reached.Lock()
	defer reached.Unlock()
	if len(sent) > 0 {
		t.Errorf("the redirect was followed: %q", sent)
	}
}
