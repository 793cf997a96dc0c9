package kube

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kukie/kukie-gitops/argocd"
)

func TestClassify(t *testing.T) {
	apps := schema.GroupResource{Group: "argoproj.io", Resource: "applications"}
	urlErr := func(err error) error {
		return &url.Error{Op: "Get", URL: "https://10.0.0.1:6443/apis", Err: err}
	}
	tests := map[string]struct {
		err  error
		want argocd.FailureClass
	}{
		"nil":                     {err: nil, want: ""},
		"403":                     {err: apierrors.NewForbidden(apps, "", errors.New("no rbac")), want: argocd.FailureForbidden},
		"401":                     {err: apierrors.NewUnauthorized("token expired"), want: argocd.FailureUnreachable},
		"404":                     {err: apierrors.NewNotFound(apps, "shop"), want: argocd.FailureNotFound},
		"504 from the API server": {err: apierrors.NewTimeoutError("etcd slow", 1), want: argocd.FailureUnreachable},
		"500":                     {err: apierrors.NewInternalError(errors.New("boom")), want: argocd.FailureOther},
		"wrapped 403":             {err: fmt.Errorf("list: %w", apierrors.NewForbidden(apps, "", errors.New("x"))), want: argocd.FailureForbidden},
		"kind not served":         {err: &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "argoproj.io", Kind: "Application"}}, want: argocd.FailureNotFound},
		"deadline":                {err: context.DeadlineExceeded, want: argocd.FailureUnreachable},
		"canceled":                {err: fmt.Errorf("get: %w", context.Canceled), want: argocd.FailureUnreachable},
		"connection refused": {
			err:  urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}),
			want: argocd.FailureUnreachable,
		},
		"dns":              {err: urlErr(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "api.gone.example", IsNotFound: true}}), want: argocd.FailureUnreachable},
		"unknown ca":       {err: urlErr(x509.UnknownAuthorityError{}), want: argocd.FailureUnreachable},
		"wrong host cert":  {err: urlErr(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "api"}), want: argocd.FailureUnreachable},
		"reset":            {err: syscall.ECONNRESET, want: argocd.FailureUnreachable},
		"eof":              {err: urlErr(io.EOF), want: argocd.FailureUnreachable},
		"other url error":  {err: urlErr(errors.New("proxyconnect failed")), want: argocd.FailureUnreachable},
		"text: refused":    {err: errors.New(`Get "https://10.0.0.1:6443/api": dial tcp 10.0.0.1:6443: connect: connection refused`), want: argocd.FailureUnreachable},
		"text: dns":        {err: errors.New("dial tcp: lookup api.gone.example: no such host"), want: argocd.FailureUnreachable},
		"text: tls":        {err: errors.New("tls: failed to verify certificate: x509: certificate has expired"), want: argocd.FailureUnreachable},
		"text: i/o":        {err: errors.New("read tcp 10.0.0.2:51234->10.0.0.1:6443: i/o timeout"), want: argocd.FailureUnreachable},
		"text: unrelated":  {err: errors.New("the object has been modified"), want: argocd.FailureOther},
		"classified error": {err: fmt.Errorf("decide: %w", &Error{Class: argocd.FailureNotInstalled, Op: "list applications", Err: errors.New("x")}), want: argocd.FailureNotInstalled},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ClassOf(tc.err); got != tc.want {
				t.Errorf("ClassOf(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

// Text matching is the last resort: a typed error wins over misleading text.
func TestClassifyPrefersTypesOverText(t *testing.T) {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x", errors.New("connection refused by policy"))
	if got := Classify(err); got != argocd.FailureForbidden {
		t.Errorf("Classify = %q, want forbidden", got)
	}
}
