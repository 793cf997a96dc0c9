package helmrepo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/helmrepo"
	"github.com/kukie/kukie-gitops/render"
)

// TestFetchRefusesHostAndMetadataAddressesHoweverWritten: a Chart.lock names its
// repository, so a repository's author chooses where the service connects. The
// service's own host, link-local addresses and cloud metadata endpoints are
// refused before anything is sent, also as IPv6 addresses that carry them
// (IPv4-mapped, NAT64, 6to4), which reach the same IPv4 host.
func TestFetchRefusesHostAndMetadataAddressesHoweverWritten(t *testing.T) {
	cases := map[string]struct{ host, want string }{
		"loopback, IPv4-mapped":          {"[::ffff:127.0.0.1]", "this host's own or link-local"},
		"metadata, IPv4-mapped":          {"[::ffff:169.254.169.254]", "this host's own or link-local"},
		"metadata through NAT64":         {"[64:ff9b::a9fe:a9fe]", "this host's own or link-local"},
		"loopback through NAT64":         {"[64:ff9b::7f00:1]", "this host's own or link-local"},
		"metadata through 6to4":          {"[2002:a9fe:a9fe::1]", "this host's own or link-local"},
		"unspecified":                    {"0.0.0.0", "this host's own or link-local"},
		"unspecified IPv6":               {"[::]", "this host's own or link-local"},
		"AWS metadata over IPv6":         {"[fd00:ec2::254]", "a cloud metadata endpoint"},
		"Alibaba Cloud metadata":         {"100.100.100.200", "a cloud metadata endpoint"},
		"Alibaba metadata through NAT64": {"[64:ff9b::6464:64c8]", "a cloud metadata endpoint"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dep := render.ChartDependency{Repository: "http://" + tc.host + "/charts", Name: "cache", Version: "1.2.3"}
			_, err := helmrepo.New().FetchChart(context.Background(), dep)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("fetch from %s: %v, want a refusal saying %q", tc.host, err, tc.want)
			}
		})
	}
}
