package kube_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
)

// TestErrorsShowNoBodyOfAServerThatIsNotAnAPIServer: a team's kubeconfig names the
// server the service connects to, which can be any HTTPS service the service can
// reach. client-go puts the body of an answer that is not a Kubernetes Status into
// its error (up to 2 KiB), and errors reach the team (the API, the tools, check
// runs), so an internal page would be read through them. Such a body is not shown;
// the status code and what to check are. (A real API server's refusal is a
// Status, whose message is shown: TestClassify and the envtest tests.)
func TestErrorsShowNoBodyOfAServerThatIsNotAnAPIServer(t *testing.T) {
	const page = "<html>internal admin page: db_password=hunter2</html>"
	cases := map[string]struct {
		status      int
		contentType string
		body        string
		wantText    string
		hidden      string
		wantClass   argocd.FailureClass
	}{
		"internal error page": {status: http.StatusInternalServerError, contentType: "text/html", body: page,
			wantText: "HTTP 500", hidden: "hunter2", wantClass: argocd.FailureOther},
		"forbidden page": {status: http.StatusForbidden, contentType: "text/html", body: page,
			wantText: "HTTP 403", hidden: "hunter2", wantClass: argocd.FailureForbidden},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			t.Cleanup(srv.Close)
			doc := kubeconfigDoc("    server: "+srv.URL+"\n    certificate-authority-data: "+caData(srv), "    token: t")
			c, err := kube.NewClusters(kube.Options{}).Get("cluster-1", kube.Access{Kubeconfig: doc})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.ListApplications(context.Background(), kube.Refresh)
			if err == nil {
				t.Fatal("the read succeeded")
			}
			text := err.Error()
			if !strings.Contains(text, tc.wantText) || (tc.hidden != "" && strings.Contains(text, tc.hidden)) {
				t.Errorf("error = %q, want it to say %q and not show the answer's body", text, tc.wantText)
			}
			if got := kube.ClassOf(err); got != tc.wantClass {
				t.Errorf("class = %s, want %s", got, tc.wantClass)
			}
		})
	}
}
