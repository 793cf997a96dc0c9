package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kukie/kukie-gitops/argocd"
)

// Error is a failed cluster call with its class. Every error returned by this package
// for a cluster call is, or wraps, an *Error.
type Error struct {
	Class argocd.FailureClass
	// Op says what was attempted ("list applications", "get apps/Deployment shop/web").
	Op  string
	Err error
}

func (e *Error) Error() string {
	var refused *KubeconfigError
	if errors.As(e.Err, &refused) {
		// A connection the kubeconfig's server may not have (see guardedDial),
		// without client-go's request line around it.
		return e.Op + ": kubeconfig refused: " + refused.Error()
	}
	if code, ok := foreignAnswer(e.Err); ok {
		return fmt.Sprintf("%s: the server answered HTTP %d, and not as a Kubernetes API server does (its answer is not shown); "+
			"check that the kubeconfig's server is the cluster's API server", e.Op, code)
	}
	return e.Op + ": " + e.Err.Error()
}

// foreignAnswer reports whether err is client-go's error for an answer that was not
// a Kubernetes Status, and its HTTP status. client-go puts up to 2 KiB of such a
// body into its message, and the server is whatever a team's kubeconfig names, any
// HTTPS service the service can reach: its page must not reach the team through
// this error.
func foreignAnswer(err error) (int32, bool) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return 0, false
	}
	st := status.Status()
	if st.Details == nil {
		return 0, false
	}
	for _, c := range st.Details.Causes {
		if c.Type == metav1.CauseTypeUnexpectedServerResponse {
			return st.Code, true
		}
	}
	return 0, false
}

func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns the class of err: that of the first *Error in its chain, otherwise
// Classify(err). It is empty for nil.
func ClassOf(err error) argocd.FailureClass {
	var ke *Error
	if errors.As(err, &ke) {
		return ke.Class
	}
	return Classify(err)
}

func classified(op string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Class: Classify(err), Op: op, Err: err}
}

// Classify maps an error of client-go, apimachinery, net, TLS or a context to a class
// by its type; only errors that carry no type (text from a proxy or an older library)
// are matched by their text.
func Classify(err error) argocd.FailureClass {
	if err == nil {
		return ""
	}
	// An HTTP answer from the API server is a typed status error.
	if errors.As(err, new(apierrors.APIStatus)) {
		return classifyStatus(err)
	}
	switch {
	case meta.IsNoMatchError(err):
		return argocd.FailureNotFound
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return argocd.FailureUnreachable
	case isTransportError(err):
		return argocd.FailureUnreachable
	case matchesUnreachableText(err.Error()):
		return argocd.FailureUnreachable
	default:
		return argocd.FailureOther
	}
}

func classifyStatus(err error) argocd.FailureClass {
	switch {
	case apierrors.IsUnauthorized(err):
		// Rejected credentials: the cluster cannot be used until they are replaced.
		return argocd.FailureUnreachable
	case apierrors.IsForbidden(err):
		return argocd.FailureForbidden
	case apierrors.IsNotFound(err):
		return argocd.FailureNotFound
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return argocd.FailureUnreachable
	default:
		return argocd.FailureOther
	}
}

// isTransportError reports failures below HTTP: no connection, no name, no TLS, or a
// connection that broke before an answer.
func isTransportError(err error) bool {
	var (
		urlErr     *url.Error
		netErr     net.Error
		opErr      *net.OpError
		dnsErr     *net.DNSError
		unknownCA  x509.UnknownAuthorityError
		hostErr    x509.HostnameError
		invalid    x509.CertificateInvalidError
		verifyErr  *tls.CertificateVerificationError
		recordErr  tls.RecordHeaderError
		alertErr   tls.AlertError
		errnoValue syscall.Errno
	)
	switch {
	case errors.As(err, &opErr), errors.As(err, &dnsErr):
		return true
	case errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalid),
		errors.As(err, &verifyErr), errors.As(err, &recordErr), errors.As(err, &alertErr):
		return true
	case errors.As(err, &errnoValue):
		switch errnoValue {
		case syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
			syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT:
			return true
		}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.As(err, &netErr) && netErr.Timeout():
		return true
	case errors.As(err, &urlErr):
		// client-go reports every request that got no HTTP answer as a *url.Error.
		return true
	}
	return false
}

// unreachableTexts are the messages of transport failures that reach this package as
// plain text, for example through an authenticating proxy's error page.
var unreachableTexts = []string{
	"connection refused",
	"no such host",
	"i/o timeout",
	"tls handshake timeout",
	"x509: ",
	"tls: ",
	"connection reset by peer",
	"broken pipe",
	"no route to host",
	"network is unreachable",
	"client.timeout exceeded",
	"context deadline exceeded",
	"server gave http response to https client",
	"unexpected eof",
}

func matchesUnreachableText(msg string) bool {
	msg = strings.ToLower(msg)
	for _, t := range unreachableTexts {
		if strings.Contains(msg, t) {
			return true
		}
	}
	return false
}
