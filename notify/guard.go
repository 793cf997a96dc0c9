package notify

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// An endpoint URL is a team's input, and the service runs inside a network the team
// does not: without a guard, a team could make the service POST to its cloud
// metadata address, a database's HTTP port or anything else only the service can
// reach. The guard refuses, at registration, URLs naming a non-public address, and
// at every send the address actually dialled, so a name that resolves to an
// internal address (at once, or after a DNS change) is refused too.

// guard decides which addresses deliveries may reach: public unicast addresses on
// any port (an endpoint may listen on 8443 as well as 443).
var guard = ssrf.New(ssrf.WithAnyPort())

// errNotPublic is why a delivery or a registration was refused by the guard.
var errNotPublic = errors.New("deliveries reach public addresses only (notifications.allow_private_networks is off)")

// checkHost refuses a URL host that is itself a non-public address: an IP literal
// outside the public ranges, or localhost. Other names are checked when dialled.
func checkHost(host string) error {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return fmt.Errorf("url host %s is this machine: %w", host, errNotPublic)
	}
	addr, err := netip.ParseAddr(strings.Trim(h, "[]"))
	if err != nil {
		return nil // a name, checked on the address it resolves to
	}
	if err := guard.SafeAddr(addr.Unmap()); err != nil {
		return fmt.Errorf("url host %s is not a public address: %w", host, errNotPublic)
	}
	return nil
}

// guardedClient sends deliveries only to public addresses. It uses no proxy from
// the environment: a proxy would dial the endpoint itself, out of the guard's
// sight.
func guardedClient(timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: func(network, address string, _ syscall.RawConn) error {
		if err := guard.Safe(network, address, nil); err != nil {
			return fmt.Errorf("connect to %s: %w: %v", address, errNotPublic, err)
		}
		return nil
	}}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          20,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}}
}

// openClient is the client when private networks are allowed.
func openClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout}
}
