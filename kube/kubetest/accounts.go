package kubetest

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Account is a ServiceAccount of its own namespace bound to cluster-admin, reached
// with tokens that can be revoked one by one: each is bound to a Secret of its own
// and stops authenticating once that Secret is deleted. Deleting the binding
// withdraws the account's rights instead (a 403 for every request).
type Account struct {
	env       *Env
	Namespace string
	Name      string
	binding   *rbacv1.ClusterRoleBinding
}

// NewAccount creates a ServiceAccount named name in a new namespace and binds it to
// cluster-admin. Objects live as long as the server (a namespace is never deleted).
func (e *Env) NewAccount(tb testing.TB, name string) *Account {
	tb.Helper()
	ctx := context.Background()
	a := &Account{env: e, Namespace: e.Namespace(tb, name), Name: name}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: name}}
	if err := e.Client.Create(ctx, sa); err != nil {
		tb.Fatalf("create service account %s/%s: %v", a.Namespace, name, err)
	}
	a.Bind(tb)
	return a
}

// Bind grants the account cluster-admin (again, after Unbind).
func (a *Account) Bind(tb testing.TB) {
	tb.Helper()
	a.binding = &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: a.Namespace + "-" + a.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: a.Namespace, Name: a.Name}},
	}
	if err := a.env.Client.Create(context.Background(), a.binding); err != nil {
		tb.Fatalf("bind service account %s/%s: %v", a.Namespace, a.Name, err)
	}
}

// Unbind deletes the account's binding: its tokens still authenticate, and every
// request is forbidden.
func (a *Account) Unbind(tb testing.TB) {
	tb.Helper()
	if err := a.env.Client.Delete(context.Background(), a.binding); err != nil {
		tb.Fatalf("unbind service account %s/%s: %v", a.Namespace, a.Name, err)
	}
}

// Token issues a token of the account (TokenRequest, bound to a new Secret named
// secret) and returns a kubeconfig with it inline, as a team would register it, and
// the function that revokes the token by deleting its Secret.
func (a *Account) Token(tb testing.TB, secret string) (kubeconfig []byte, revoke func()) {
	tb.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: secret}}
	if err := a.env.Client.Create(ctx, s); err != nil {
		tb.Fatalf("create secret %s/%s: %v", a.Namespace, secret, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Name}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: secret, UID: s.UID},
	}}
	if err := a.env.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		tb.Fatalf("request a token of %s/%s: %v", a.Namespace, a.Name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: a.env.Config.Host, CertificateAuthorityData: a.env.Config.CAData}
	cfg.AuthInfos[a.Name] = &clientcmdapi.AuthInfo{Token: req.Status.Token}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: a.Name}
	cfg.CurrentContext = "envtest"
	kc, err := clientcmd.Write(*cfg)
	if err != nil {
		tb.Fatalf("write kubeconfig: %v", err)
	}
	return kc, func() {
		tb.Helper()
		if err := a.env.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			tb.Fatalf("revoke token %s/%s: %v", a.Namespace, secret, err)
		}
	}
}
