// Package netguard judges the addresses the service connects to for a team, where
// the team chose the host: a chart repository a Chart.lock names, a cluster's API
// server a kubeconfig names. Such a host may be written to reach what only the
// service can: a cloud metadata endpoint, which hands out the credentials of the
// machine the service runs on, or this host's own services.
//
// [Policy.Control] judges an address at connection time (a net.Dialer's Control),
// after name resolution, so a name that resolves to another address than the one
// checked earlier is judged by the address connected to; [Policy.DialContext]
// resolves a name itself (through Policy.Resolve, which tests replace), judges
// every address it resolves to and connects only to those, so a name that
// resolves, or comes to resolve (DNS rebinding), to a refused address is refused
// when it is dialled; [Policy.Check] judges an address given literally. An IPv4 address written inside an IPv6 one
// (IPv4-mapped, NAT64's 64:ff9b::/96, 6to4's 2002::/16) reaches the IPv4 host, so
// it is judged as that.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"time"
)

// Policy says which addresses a kind of connection refuses beyond the ones every
// kind does (cloud metadata endpoints, link-local, unspecified).
type Policy struct {
	// What names the connections in a refusal: "chart repositories are not read
	// from it".
	What string
	// Loopback allows this host's own addresses: a cluster a developer runs on
	// their machine, a repository a test serves.
	Loopback bool
	// Resolve looks a host name up for DialContext; net.DefaultResolver's
	// LookupNetIP when nil.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

// RefusedError is a connection DialContext refused: Host as dialled (a name or an
// address), the address it resolved to that the policy refuses, and why.
type RefusedError struct {
	Host string
	Addr netip.Addr
	Err  error
}

func (e *RefusedError) Error() string {
	if a, err := netip.ParseAddr(e.Host); err == nil && a == e.Addr {
		return e.Err.Error()
	}
	return fmt.Sprintf("%s resolves to %s: %v", e.Host, e.Addr, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// dialer is how DialContext connects once the addresses passed: client-go's and
// net/http's defaults.
var dialer = net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}

// DialContext connects to address (host:port) as a net.Dialer's DialContext does,
// but only when every address host resolves to passes the policy: a name with one
// refused address among others is refused whole, since whoever controls its
// records chose it. The addresses checked are the ones connected to, in the order
// resolved, each also judged by Control when connecting; the name is not looked
// up again between the check and the connection. A refusal is a *RefusedError.
func (p Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		resolve := p.Resolve
		if resolve == nil {
			resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		if addrs, err = resolve(ctx, host); err != nil {
			return nil, err
		}
		if len(addrs) == 0 {
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
	}
	for _, a := range addrs {
		if err := p.Check(a); err != nil {
			return nil, &RefusedError{Host: host, Addr: a, Err: err}
		}
	}
	d := dialer
	d.Control = p.Control
	var errs []error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, errors.Join(errs...)
}

// Check refuses ip if the policy does, saying why.
func (p Policy) Check(ip netip.Addr) error {
	for _, a := range reachedAddrs(ip) {
		if slices.Contains(metadataAddrs, a) {
			return fmt.Errorf("address %s is a cloud metadata endpoint: %s", ip, p.What)
		}
		if (a.IsLoopback() && !p.Loopback) || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() {
			if p.Loopback {
				return fmt.Errorf("address %s is link-local or unspecified: %s", ip, p.What)
			}
			return fmt.Errorf("address %s is this host's own or link-local: %s", ip, p.What)
		}
	}
	return nil
}

// Control is p as a net.Dialer's Control: it refuses the connection before it is
// made.
func (p Policy) Control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("address %s is not an IP address", address)
	}
	return p.Check(ip)
}

// metadataAddrs are cloud metadata endpoints outside the link-local ranges (most
// clouds' 169.254.169.254 is link-local): AWS's IPv6 one and Alibaba Cloud's.
var metadataAddrs = []netip.Addr{netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200")}

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// reachedAddrs are ip and the IPv4 address it carries, if any.
func reachedAddrs(ip netip.Addr) []netip.Addr {
	ip = ip.Unmap()
	out := []netip.Addr{ip}
	b := ip.As16()
	switch {
	case nat64Prefix.Contains(ip):
		out = append(out, netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(ip):
		out = append(out, netip.AddrFrom4([4]byte(b[2:6])))
	}
	return out
}
