package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// TestPolicyJudgesAddressesHoweverWritten: metadata endpoints, link-local and
// unspecified addresses are refused whichever way they are written, loopback as
// the policy says, and the addresses clusters and repositories really live on
// pass.
func TestPolicyJudgesAddressesHoweverWritten(t *testing.T) {
	strict := Policy{What: "not here"}
	local := Policy{What: "not here", Loopback: true}
	for addr, want := range map[string]struct{ strict, local string }{
		"169.254.169.254":        {"link-local", "link-local"},
		"::ffff:169.254.169.254": {"link-local", "link-local"},
		"64:ff9b::a9fe:a9fe":     {"link-local", "link-local"},
		"2002:a9fe:a9fe::1":      {"link-local", "link-local"},
		"fe80::1":                {"link-local", "link-local"},
		"fd00:ec2::254":          {"cloud metadata endpoint", "cloud metadata endpoint"},
		"100.100.100.200":        {"cloud metadata endpoint", "cloud metadata endpoint"},
		"::ffff:100.100.100.200": {"cloud metadata endpoint", "cloud metadata endpoint"},
		"0.0.0.0":                {"link-local", "link-local"},
		"::":                     {"link-local", "link-local"},
		"127.0.0.1":              {"this host's own", ""},
		"::1":                    {"this host's own", ""},
		"64:ff9b::7f00:1":        {"this host's own", ""},
		"10.0.0.1":               {"", ""},
		"192.168.49.2":           {"", ""},
		"2001:db8::1":            {"", ""},
		"100.64.0.1":             {"", ""},
		"fd00:ec2::253":          {"", ""},
		"::ffff:10.96.0.1":       {"", ""},
		"2002:0a00:0001::1":      {"", ""},
		"64:ff9b::0a00:1":        {"", ""},
		"2606:4700:4700::1111":   {"", ""},
		"::ffff:192.168.100.200": {"", ""},
		"fd12:3456:789a:1::1":    {"", ""},
		"172.16.0.1":             {"", ""},
		"203.0.113.7":            {"", ""},
		"198.51.100.20":          {"", ""},
		"192.0.2.1":              {"", ""},
		"100.100.100.201":        {"", ""},
		"169.253.255.255":        {"", ""},
		"169.255.0.1":            {"", ""},
		"fec0::1":                {"", ""},
		"ff02::1":                {"link-local", "link-local"},
		"224.0.0.251":            {"link-local", "link-local"},
		"::ffff:0.0.0.0":         {"link-local", "link-local"},
	} {
		ip := netip.MustParseAddr(addr)
		for _, c := range []struct {
			name string
			p    Policy
			want string
		}{{"strict", strict, want.strict}, {"loopback allowed", local, want.local}} {
			err := c.p.Check(ip)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%s, %s: refused (%v), want allowed", addr, c.name, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "not here")):
				t.Errorf("%s, %s: %v, want a refusal saying %q and the policy's words", addr, c.name, err, c.want)
			}
		}
	}
}

// TestControlRefusesBeforeConnecting: as a dialer's Control the policy refuses the
// resolved address, and an address that is not an IP is refused rather than
// passed.
func TestControlRefusesBeforeConnecting(t *testing.T) {
	p := Policy{What: "not here", Loopback: true}
	if err := p.Control("tcp", "169.254.169.254:443", nil); err == nil || !strings.Contains(err.Error(), "link-local") {
		t.Errorf("metadata address: %v, want refused", err)
	}
	if err := p.Control("tcp", "127.0.0.1:6443", nil); err != nil {
		t.Errorf("loopback with loopback allowed: %v", err)
	}
	if err := p.Control("tcp", "cluster.example:443", nil); err == nil {
		t.Error("a name reached Control unresolved and passed")
	}
}

// TestDialContextJudgesWhatANameResolvesTo: a name is refused when it resolves to
// a refused address (among others too), and again when it comes to resolve to one
// after it was dialled (DNS rebinding); a name resolving to an allowed address is
// connected to, and a literal address is judged without a lookup.
func TestDialContextJudgesWhatANameResolvesTo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	var mu sync.Mutex
	records := map[string][]netip.Addr{
		"cluster.test":  {netip.MustParseAddr("127.0.0.1")},
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		"aws.test":      {netip.MustParseAddr("fd00:ec2::254")},
		"mixed.test":    {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("100.100.100.200")},
		"empty.test":    {},
	}
	lookups := 0
	p := Policy{What: "not here", Loopback: true, Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
		mu.Lock()
		defer mu.Unlock()
		lookups++
		addrs, ok := records[host]
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return addrs, nil
	}}
	ctx := context.Background()
	dial := func(host string) error {
		c, err := p.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial("cluster.test"); err != nil {
		t.Fatalf("a name resolving to loopback: %v", err)
	}
	for host, want := range map[string]string{
		"metadata.test":   "metadata.test resolves to 169.254.169.254: address 169.254.169.254 is link-local",
		"aws.test":        "aws.test resolves to fd00:ec2::254: address fd00:ec2::254 is a cloud metadata endpoint",
		"mixed.test":      "mixed.test resolves to 100.100.100.200: address 100.100.100.200 is a cloud metadata endpoint",
		"169.254.169.254": "address 169.254.169.254 is link-local or unspecified: not here",
	} {
		err := dial(host)
		var refused *RefusedError
		if !errors.As(err, &refused) || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "not here") {
			t.Errorf("%s: %v, want a *RefusedError %q…", host, err, want)
		}
	}
	if err := dial("empty.test"); err == nil || errors.As(err, new(*RefusedError)) {
		t.Errorf("a name with no address: %v, want a lookup failure", err)
	}
	mu.Lock()
	before := lookups
	records["cluster.test"] = []netip.Addr{netip.MustParseAddr("::ffff:169.254.169.254")}
	mu.Unlock()
	if err := dial("cluster.test"); !errors.As(err, new(*RefusedError)) {
		t.Errorf("a name rebound to the metadata endpoint after it was dialled: %v, want refused", err)
	}
	if err := dial("169.254.169.254"); lookups != before+1 {
		t.Errorf("%d lookups for a name and a literal address (%v), want 1", lookups-before, err)
	}
}
