package clusteraccess

import "testing"

// An Application's destination address and a kubeconfig's server name the same
// API server however each writes its scheme, host case, default port and
// trailing slash; another port, host, scheme or path is another server.
func TestNormalServer(t *testing.T) {
	same := [][2]string{
		{"https://api.example:6443", "https://api.example:6443/"},
		{"https://API.Example:6443", "https://api.example:6443"},
		{"HTTPS://api.example", "https://api.example:443"},
		{"api.example:6443", "https://api.example:6443"},
		{"http://10.0.0.1", "http://10.0.0.1:80/"},
		{"https://[fd00::1]:6443/", "https://[FD00::1]:6443"},
		{"https://rancher.example/k8s/clusters/c-1/", "https://rancher.example:443/k8s/clusters/c-1"},
	}
	for _, p := range same {
		a, okA := normalServer(p[0])
		b, okB := normalServer(p[1])
		if !okA || !okB || a != b {
			t.Errorf("%q (%q, %t) and %q (%q, %t) differ", p[0], a, okA, p[1], b, okB)
		}
	}
	differ := [][2]string{
		{"https://api.example:6443", "https://api.example:443"},
		{"https://api.example", "http://api.example"},
		{"https://api.example", "https://api2.example"},
		{"https://rancher.example/k8s/clusters/c-1", "https://rancher.example/k8s/clusters/c-2"},
	}
	for _, p := range differ {
		a, _ := normalServer(p[0])
		b, _ := normalServer(p[1])
		if a == b {
			t.Errorf("%q and %q are the same (%q)", p[0], p[1], a)
		}
	}
	for _, bad := range []string{"", "ftp://api.example", "https://", "https://api.example:port"} {
		if got, ok := normalServer(bad); ok {
			t.Errorf("%q is taken as %q", bad, got)
		}
	}
}
