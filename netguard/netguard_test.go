package netguard

import (
	"net/netip"
	"strings"
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
