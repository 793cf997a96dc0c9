package kube

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/netguard"
)

// KubeconfigError is why a kubeconfig was refused: the setting (entry and field, as
// the kubeconfig spells them) and what to give instead. Its text is meant for the
// team that gave the kubeconfig.
type KubeconfigError struct {
	// Field names the setting, such as users[admin].exec.
	Field  string
	Reason string
}

func (e *KubeconfigError) Error() string { return e.Field + ": " + e.Reason }

// Why each refused setting is refused. A kubeconfig comes from a team, and the
// service uses it on its own host with its own files, processes and network.
const (
	reasonExec = "credential plugins are not accepted: the service would run the command on its own host; " +
		"give the credentials inline (token, or client-certificate-data and client-key-data)"
	reasonAuthProvider = "auth providers are not accepted: they run code and call other hosts to obtain tokens; " +
		"give the credentials inline (token, or client-certificate-data and client-key-data)"
	reasonFile  = "file paths are not accepted: the service would read the file from its own disk; give the content inline in %s"
	reasonProxy = "proxies are not accepted: the service reaches the API server directly, through whatever proxy its " +
		"operator configured"
	reasonUnknown = "this setting is not accepted; a kubeconfig may carry only a server URL, TLS settings with inline data " +
		"and inline credentials (token, client certificate and key data, username and password, impersonation)"
)

// LoadKubeconfig parses a kubeconfig a team gave (with client-go's own decoder) and
// accepts it only if every cluster, user and context in it carries inline settings:
// an https server URL (no credentials, query or fragment in it), TLS settings with
// inline data, and inline credentials (token,
// client-certificate-data and client-key-data, username and password, impersonation).
// Exec credential plugins, auth providers, file paths (tokenFile, client-certificate,
// client-key, certificate-authority) and proxy-url are refused with a
// *KubeconfigError naming the setting. Every entry is checked, not only the current
// context's, so a stored document holds nothing that a later choice of context could
// turn against the service. The returned config keeps only the accepted fields
// (extensions and preferences, which client-go does not act on, are dropped), so
// nothing else reaches client-go even if it learns new fields.
//
// insecure-skip-tls-verify: true is refused too (see KubeconfigOptions), and so is
// a field kubeconfigs do not have (see checkKnownFields): client-go ignores one,
// so a misspelt token or server would otherwise be dropped without a word. Two
// entries of one name are refused naming them (see checkUniqueNames), never with
// what they hold.
func LoadKubeconfig(b []byte) (*clientcmdapi.Config, error) {
	cfg, _, err := LoadKubeconfigWith(b, KubeconfigOptions{})
	return cfg, err
}

// KubeconfigOptions say what LoadKubeconfigWith accepts beyond inline settings.
type KubeconfigOptions struct {
	// AllowInsecureTLS accepts insecure-skip-tls-verify: true, with a warning
	// (the operator's clusters.allow_insecure_tls). Without a verified
	// certificate, whoever answers at the server's address (a man in the middle)
	// is sent the team's credentials.
	AllowInsecureTLS bool
}

// reasonInsecure is why insecure-skip-tls-verify is refused, and warnInsecure
// what is said of it where the operator allows it.
const (
	reasonInsecure = "the API server's certificate would not be verified, so the credentials would go to whoever answers at " +
		"the server's address; give certificate-authority-data (the cluster's CA certificate, base64-encoded) instead " +
		"(the service's operator has not allowed unverified TLS: clusters.allow_insecure_tls)"
	warnInsecure = "the API server's certificate is not verified (allowed by the service's operator), so the credentials go to " +
		"whoever answers at the server's address; give certificate-authority-data (the cluster's CA certificate, base64-encoded) instead"
)

// LoadKubeconfigWith is LoadKubeconfig with opts; warnings say what opts allowed
// that the team should change, each starting with the setting's name.
func LoadKubeconfigWith(b []byte, opts KubeconfigOptions) (cfg *clientcmdapi.Config, warnings []string, err error) {
	if err := checkUniqueNames(b); err != nil {
		return nil, nil, err
	}
	raw, err := clientcmd.Load(b)
	if err != nil {
		return nil, nil, fmt.Errorf("parse kubeconfig: %w", err)
	}
	if err := checkKnownFields(b); err != nil {
		return nil, nil, err
	}
	out := clientcmdapi.NewConfig()
	out.CurrentContext = raw.CurrentContext
	for _, name := range slices.Sorted(maps.Keys(raw.AuthInfos)) {
		u, err := inlineUser(name, raw.AuthInfos[name])
		if err != nil {
			return nil, nil, err
		}
		out.AuthInfos[name] = u
	}
	for _, name := range slices.Sorted(maps.Keys(raw.Clusters)) {
		c, err := inlineCluster(name, raw.Clusters[name])
		if err != nil {
			return nil, nil, err
		}
		if c.InsecureSkipTLSVerify {
			field := fmt.Sprintf("clusters[%s].insecure-skip-tls-verify", name)
			if !opts.AllowInsecureTLS {
				return nil, nil, &KubeconfigError{Field: field, Reason: reasonInsecure}
			}
			warnings = append(warnings, field+": "+warnInsecure)
		}
		out.Clusters[name] = c
	}
	for _, name := range slices.Sorted(maps.Keys(raw.Contexts)) {
		c := raw.Contexts[name]
		if c == nil {
			continue
		}
		out.Contexts[name] = &clientcmdapi.Context{Cluster: c.Cluster, AuthInfo: c.AuthInfo, Namespace: c.Namespace}
	}
	return out, warnings, nil
}

// inlineUser and inlineCluster return the entry's accepted fields. An entry that
// sets anything beyond them (once the origin and extensions, which client-go does not
// act on, are cleared) carries a setting this check does not know, one a newer
// client-go may act on: it is refused rather than passed through or dropped
// silently.
func inlineUser(name string, u *clientcmdapi.AuthInfo) (*clientcmdapi.AuthInfo, error) {
	field := func(f string) string { return fmt.Sprintf("users[%s].%s", name, f) }
	if u == nil {
		return &clientcmdapi.AuthInfo{}, nil
	}
	switch {
	case u.Exec != nil:
		return nil, &KubeconfigError{Field: field("exec"), Reason: reasonExec}
	case u.AuthProvider != nil:
		return nil, &KubeconfigError{Field: field("auth-provider"), Reason: reasonAuthProvider}
	case u.TokenFile != "":
		return nil, &KubeconfigError{Field: field("tokenFile"), Reason: fmt.Sprintf(reasonFile, "token")}
	case u.ClientCertificate != "":
		return nil, &KubeconfigError{Field: field("client-certificate"), Reason: fmt.Sprintf(reasonFile, "client-certificate-data")}
	case u.ClientKey != "":
		return nil, &KubeconfigError{Field: field("client-key"), Reason: fmt.Sprintf(reasonFile, "client-key-data")}
	}
	kept := &clientcmdapi.AuthInfo{
		ClientCertificateData: u.ClientCertificateData,
		ClientKeyData:         u.ClientKeyData,
		Token:                 u.Token,
		Impersonate:           u.Impersonate,
		ImpersonateUID:        u.ImpersonateUID,
		ImpersonateGroups:     u.ImpersonateGroups,
		ImpersonateUserExtra:  u.ImpersonateUserExtra,
		Username:              u.Username,
		Password:              u.Password,
	}
	unused := *u
	unused.LocationOfOrigin, unused.Extensions = "", nil
	if !reflect.DeepEqual(&unused, kept) {
		return nil, &KubeconfigError{Field: field("user"), Reason: reasonUnknown}
	}
	return kept, nil
}

func inlineCluster(name string, c *clientcmdapi.Cluster) (*clientcmdapi.Cluster, error) {
	field := func(f string) string { return fmt.Sprintf("clusters[%s].%s", name, f) }
	if c == nil {
		return nil, &KubeconfigError{Field: field("server"), Reason: "a server URL is required"}
	}
	switch {
	case c.CertificateAuthority != "":
		return nil, &KubeconfigError{Field: field("certificate-authority"), Reason: fmt.Sprintf(reasonFile, "certificate-authority-data")}
	case c.ProxyURL != "":
		return nil, &KubeconfigError{Field: field("proxy-url"), Reason: reasonProxy}
	}
	if err := checkServer(c.Server); err != nil {
		return nil, &KubeconfigError{Field: field("server"), Reason: err.Error()}
	}
	kept := &clientcmdapi.Cluster{
		Server:                   c.Server,
		TLSServerName:            c.TLSServerName,
		InsecureSkipTLSVerify:    c.InsecureSkipTLSVerify,
		CertificateAuthorityData: c.CertificateAuthorityData,
		DisableCompression:       c.DisableCompression,
	}
	unused := *c
	unused.LocationOfOrigin, unused.Extensions = "", nil
	if !reflect.DeepEqual(&unused, kept) {
		return nil, &KubeconfigError{Field: field("cluster"), Reason: reasonUnknown}
	}
	return kept, nil
}

// checkKnownFields refuses a kubeconfig that sets a field client-go's kubeconfig
// type (clientcmd's v1 Config) does not have, with a *KubeconfigError naming the
// entry that holds it (users[ci].user) and the field, and the known field it was
// likely meant to be. client-go's decoder ignores such a field, so a misspelt
// token, server or certificate-authority-data would leave the cluster reached
// without it, and the team guessing why. Only names of settings are told, never a
// value: a name that does not look like a setting's (a credential pasted as a
// key, say) is not shown either. Extensions are free-form and not looked into.
// b has been parsed by clientcmd.Load already.
func checkKnownFields(b []byte) error {
	doc, err := decodeDocument(b)
	if err != nil {
		return err
	}
	return knownFields(doc, reflect.TypeFor[clientcmdv1.Config](), "top level")
}

// decodeDocument is the kubeconfig b (YAML or JSON) as decoded JSON.
func decodeDocument(b []byte) (any, error) {
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("parse kubeconfig: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("parse kubeconfig: %w", err)
	}
	return doc, nil
}

// checkUniqueNames refuses a kubeconfig with two entries of one name in a list
// (users, clusters, contexts, the extensions at any level), with a
// *KubeconfigError naming the list and the name. client-go's decoder refuses them
// too, but its error prints both entries whole, token, password and key bytes,
// into a text the team's answer and the service's log carry. A document that does
// not parse is left to client-go's decoder, which says why.
func checkUniqueNames(b []byte) error {
	doc, err := decodeDocument(b)
	if err != nil {
		return nil
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	if err := uniqueNames(top, "extensions", ""); err != nil {
		return err
	}
	if prefs, ok := top["preferences"].(map[string]any); ok {
		if err := uniqueNames(prefs, "extensions", "preferences."); err != nil {
			return err
		}
	}
	for _, list := range []struct{ name, body string }{{"clusters", "cluster"}, {"users", "user"}, {"contexts", "context"}} {
		if err := uniqueNames(top, list.name, ""); err != nil {
			return err
		}
		entries, _ := top[list.name].([]any)
		for i, entry := range entries {
			m, _ := entry.(map[string]any)
			body, _ := m[list.body].(map[string]any)
			at := fmt.Sprint(i)
			if name, ok := m["name"].(string); ok && name != "" {
				at = name
			}
			if err := uniqueNames(body, "extensions", fmt.Sprintf("%s[%s].%s.", list.name, at, list.body)); err != nil {
				return err
			}
		}
	}
	return nil
}

// uniqueNames refuses two entries of m[list] of one name; path is where m is.
func uniqueNames(m map[string]any, list, path string) error {
	entries, _ := m[list].([]any)
	seen := map[string]bool{}
	for _, entry := range entries {
		e, _ := entry.(map[string]any)
		name, ok := e["name"].(string)
		if !ok {
			continue
		}
		if seen[name] {
			return &KubeconfigError{Field: fmt.Sprintf("%s%s[%s]", path, list, name),
				Reason: fmt.Sprintf("more than one entry is named %q; entries are found by name, so give each its own", name)}
		}
		seen[name] = true
	}
	return nil
}

// knownFields checks v, decoded JSON, against the fields of t at path; a value of
// another shape than t's is left to client-go's decoder, which refuses it.
func knownFields(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil // decoded by its own rules: an extension's free-form content
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		fields := jsonFields(t)
		for _, key := range slices.Sorted(maps.Keys(m)) {
			ft, ok := fields[key]
			if !ok {
				return &KubeconfigError{Field: path, Reason: unknownField(key, slices.Sorted(maps.Keys(fields)))}
			}
			if err := knownFields(m[key], ft, childPath(path, key)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		items, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, item := range items {
			// Entries are named as the refusals of their settings name them:
			// clusters[prod]; one without a name by its position.
			at := fmt.Sprint(i)
			if m, ok := item.(map[string]any); ok {
				if name, ok := m["name"].(string); ok && name != "" {
					at = name
				}
			}
			if err := knownFields(item, t.Elem(), path+"["+at+"]"); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for _, key := range slices.Sorted(maps.Keys(m)) {
			if err := knownFields(m[key], t.Elem(), path+"["+key+"]"); err != nil {
				return err
			}
		}
	}
	return nil
}

func childPath(path, key string) string {
	if path == "top level" {
		return key
	}
	return path + "." + key
}

// jsonFields are the fields of struct type t by their JSON names, as client-go's
// decoder matches them (case-sensitively).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// unknownField says that key is no field of an entry that has known, and which
// one it likely is. key is shown only if it looks like a setting's name.
func unknownField(key string, known []string) string {
	if !settingName(key) {
		return "a field kubeconfigs do not have (its name is not shown: it does not look like the name of a setting); " +
			"the fields here are " + strings.Join(known, ", ")
	}
	reason := fmt.Sprintf("unknown field %q", key)
	best, bestDist := "", 3 // two edits at most: a typo, not another word
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		return reason + fmt.Sprintf(" (did you mean %q?)", best)
	}
	return reason + "; the fields here are " + strings.Join(known, ", ")
}

// settingName reports whether s looks like the name of a kubeconfig setting
// (certificate-authority-data is the longest): letters, digits, - and _.
func settingName(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// editDistance is the Levenshtein distance of a and b (short ASCII names).
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// checkServer requires an https URL naming a host: credentials are never sent in
// clear, and other schemes (unix sockets and the like) are not API servers. The
// URL is a team's own text, which may hold a password or a token: a refusal,
// which the team's answer and the service's log carry, names it without either,
// and a URL holding one is refused for that whatever else is wrong with it.
// client-go drops a server URL's query and keeps its fragment in the URLs its
// errors name, so neither is taken: what they carry would be sent nowhere, and
// logged.
func checkServer(raw string) error {
	if raw == "" {
		return errors.New("a server URL is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which url.Error names whole
		}
		return fmt.Errorf("the server URL does not parse (%v); it is not shown, as it may carry credentials", err)
	}
	if u.User != nil {
		return errors.New("the server URL must not carry credentials; give them in the user entry")
	}
	if u.Opaque != "" {
		// https:user:pw@host: what follows the scheme may be credentials.
		return fmt.Errorf("the server URL is not an https:// URL of an API server (it is not shown, as it may carry credentials: %s:…)", u.Scheme)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawFragment != "" {
		return errors.New("the server URL must not carry a query or a fragment (it is not shown, as it may carry a token): " +
			"the API server is reached at its scheme, host, port and path only; give credentials in the user entry")
	}
	if u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%q is not an https:// URL of an API server", u.String())
	}
	if ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if err := clusterAddresses.Check(ip); err != nil {
			return err
		}
	} else if ip, ok := numericIPv4(u.Hostname()); ok {
		if err := clusterAddresses.Check(ip); err != nil {
			return fmt.Errorf("the server host %s means %w", u.Hostname(), err)
		}
		return fmt.Errorf("the server host %s means address %s; write it as %s: the service's resolver looks it up as a name, "+
			"where a system's resolver reads it as the address", u.Hostname(), ip, ip)
	}
	return nil
}

// numericIPv4 reads host as the IPv4 address the C library's inet_aton reads it
// as, which a system's resolver (getaddrinfo) takes it for, where Go's looks it up
// as a name: one to four parts, each decimal, octal (a leading 0) or hex (0x), the
// last filling the bytes left ("2852039166", "0xa9.0xfe.0xa9.0xfe", "10.1"), or a
// dotted address with a trailing dot, which names the address as a DNS root name
// ("169.254.169.254."). ok is false for a name and for a plain dotted address.
func numericIPv4(host string) (netip.Addr, bool) {
	if trimmed, dot := strings.CutSuffix(host, "."); dot {
		if ip, err := netip.ParseAddr(trimmed); err == nil && ip.Is4() {
			return ip, true
		}
		host = trimmed
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case len(p) > 2 && (p[:2] == "0x" || p[:2] == "0X"):
			base, digits = 16, p[2:]
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil || digits == "" || strings.ContainsAny(digits, "+-_") {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(n))
	return netip.AddrFrom4(b), true
}

// clusterAddresses are the server addresses a team's kubeconfig may not name: a
// cloud metadata endpoint hands out the credentials of the service's machine, and
// a link-local address is the machine's own network. Loopback stays allowed: the
// cluster a developer runs on their own machine (kind, minikube) listens there.
// A server given by name is not resolved here but at every connection, by
// guardedDial: what a name resolves to when registered says nothing of what it
// resolves to later.
var clusterAddresses = netguard.Policy{What: "an API server is not reached at it", Loopback: true}

// guardedDial connects to the API server at host (cfg.Host, for the error) only
// at an address clusterAddresses allows, looked up with resolve (the system's
// resolver when nil). A refusal is a *KubeconfigError naming serverField and the
// server; it never carries the credentials, which are not the dialer's to see.
// Through the operator's proxy (HTTPS_PROXY) the address dialled is the proxy's,
// and the proxy resolves the server's name: it has to refuse those addresses.
func guardedDial(host, serverField string, resolve func(ctx context.Context, host string) ([]netip.Addr, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	p := clusterAddresses
	p.Resolve = resolve
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := p.DialContext(ctx, network, address)
		var refused *netguard.RefusedError
		if errors.As(err, &refused) {
			return nil, &KubeconfigError{Field: serverField, Reason: fmt.Sprintf("the server %s is not connected to: %v", host, refused)}
		}
		return conn, err
	}
}
