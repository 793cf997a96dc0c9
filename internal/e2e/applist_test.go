package e2e_test

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestPlansDoNotListApplications: plans made one after the other on a cluster are
// decided and prepared from the cluster's informer on Applications, which the first
// of them starts: the API server counts no list of Applications for the later ones
// (its own request counter, so no client-side shortcut is missed). The later plans
// edit the same file, so each is decided and prepared and then waits for the first.
func TestPlansDoNotListApplications(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployWeb("main")
		var c change
		s.mustJSON("POST", "/api/v1/changes", s.scale(4, "lists-1"), http.StatusAccepted, &c)
		s.waitStatus(c.Code, "pr_open")
		first := s.applicationLists()
		for i, replicas := range []int64{5, 6, 7} {
			var next change
			s.mustJSON("POST", "/api/v1/changes", s.scale(replicas, "lists-"+strconv.Itoa(i+2)), http.StatusAccepted, &next)
			s.waitStatus(next.Code, "waiting")
			if n := s.applicationLists(); n != first {
				t.Fatalf("plan %d: the API server counts %d lists of Applications, %d more than after the first plan", i+2, n, n-first)
			}
		}
	})
}

// applicationLists is how many lists of Applications the API server has answered,
// from its apiserver_request_total counter.
func (s *service) applicationLists() int {
	s.t.Helper()
	client, err := rest.HTTPClientFor(s.kube.Config)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := client.Get(strings.TrimSuffix(s.kube.Config.Host, "/") + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET /metrics of the API server: %s", resp.Status)
	}
	n := 0
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="applications"`) || !strings.Contains(line, `verb="LIST"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			s.t.Fatalf("%s: %v", line, err)
		}
		n += int(v)
	}
	if err := lines.Err(); err != nil {
		s.t.Fatal(err)
	}
	return n
}
