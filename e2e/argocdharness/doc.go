// Package argocdharness runs a real Argo CD — the application controller and the repo
// server built by hack/argocd-build.sh, with Redis from the operating system — against
// the kube-apiserver started by kube/kubetest, so end-to-end tests can check what the
// service reads from Argo CD against what Argo CD really writes and does. StartProcess
// runs further programs the same way, such as the service itself.
//
// Everything the harness starts listens on 127.0.0.1, except the application
// controller's metrics port, which Argo CD always binds on all interfaces. Test binaries
// therefore enter through Main: as root, with unshare(1) and ip(8) available, Main runs
// the tests in a fresh loopback-only network namespace of their own. That namespace has
// no name and disappears with its last process, so neither a passing nor a crashing run
// leaves one behind. Every process is started in its own process group and stopped by
// its id when the test that started it ends.
package argocdharness
