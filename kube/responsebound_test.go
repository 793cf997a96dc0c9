package kube_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kukie/kukie-gitops/kube"
)

// TestAnAnswerLargerThanTheBoundIsNotReadWhole: a team's kubeconfig names the
// server, which can be any HTTPS service: one that answers a list with a body
// without end would have the service hold all of it in memory, whatever else it
// serves, for as long as the call's budget lets it read. The answer is read up to
// Options.MaxResponseBytes and the read fails saying so; the server is not read
// to its end.
func TestAnAnswerLargerThanTheBoundIsNotReadWhole(t *testing.T) {
	const bound = 1 << 20
	const offered = 64 << 20 // what the server sends if nobody stops reading
	var written atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		item := []byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"` + strings.Repeat("a", 200) + `"}},`)
		if _, err := w.Write([]byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"ApplicationList","metadata":{},"items":[`)); err != nil {
			return
		}
		for written.Load() < offered {
			n, err := w.Write(item)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
		_, _ = w.Write([]byte(`{}]}`))
	}))
	t.Cleanup(srv.Close)
	doc := kubeconfigDoc("    server: "+srv.URL+"\n    certificate-authority-data: "+caData(srv), "    token: t")
	c, err := kube.NewClusters(kube.Options{MaxResponseBytes: bound}).Get("cluster-1", kube.Access{Kubeconfig: doc})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListApplications(context.Background(), kube.Refresh)
	if err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") {
		t.Fatalf("ListApplications = %v, want it refused as larger than the bound", err)
	}
	srv.CloseClientConnections()
	if n := written.Load(); n >= offered {
		t.Errorf("the server's answer was read to its end (%d bytes)", n)
	}
}
