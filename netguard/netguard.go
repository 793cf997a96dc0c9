// Package netguard judges the addresses the service connects to for a team, where
// the team chose the host: a chart repository a Chart.lock names, a cluster's API
// server a kubeconfig names. Such a host may be written to reach what only the
// service can: a cloud metadata endpoint, which hands out the credentials of the
// machine the service runs on, or this host's own services.
//
// [Policy.Control] judges an address at connection time (a net.Dialer's Control),
// after name resolution, so a name that resolves to another address than the one
// checked earlier is judged by the address connected to; [Policy.Check] judges an
// address given literally. An IPv4 address written inside an IPv6 one
// (IPv4-mapped, NAT64's 64:ff9b::/96, 6to4's 2002::/16) reaches the IPv4 host, so
// it is judged as that.
package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
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
