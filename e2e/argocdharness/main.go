package argocdharness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
)

const (
	// netnsEnv controls where the tests run: unset runs them in a new network namespace
	// when possible, "off" keeps the host's, and "inside" marks the re-executed test
	// binary that already runs in its own namespace.
	netnsEnv    = "KUKIE_E2E_NETNS"
	netnsOff    = "off"
	netnsInside = "inside"
)

// Main runs the tests of m and returns the exit code for os.Exit. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(argocdharness.Main(m)) }
//
// It first builds the Argo CD and envtest assets in the host's network namespace (the
// builds download modules) and then, when it can, runs the test binary again inside a
// new loopback-only network namespace, relaying its output and exit code.
func Main(m *testing.M) int {
	switch os.Getenv(netnsEnv) {
	case netnsInside:
		if err := setUpLoopbackOnly(); err != nil {
			fmt.Fprintf(os.Stderr, "argocdharness: %v\n", err)
			return 1
		}
		return m.Run()
	case netnsOff:
		prepareAssets()
		fmt.Fprintf(os.Stderr, "argocdharness: %s=%s: running in the host network namespace; the application controller's metrics port listens on all interfaces\n", netnsEnv, netnsOff)
		return m.Run()
	}
	prepareAssets()
	if reason := netnsUnavailable(); reason != "" {
		fmt.Fprintf(os.Stderr, "argocdharness: no network namespace (%s): running in the host network namespace; the application controller's metrics port listens on all interfaces\n", reason)
		return m.Run()
	}
	code, err := runInNewNetns()
	if err != nil {
		fmt.Fprintf(os.Stderr, "argocdharness: %v\n", err)
		return 1
	}
	return code
}

// setUpLoopbackOnly configures the fresh network namespace: loopback up, plus an
// address and a default route on loopback itself. kube-apiserver refuses to start
// without a default route to pick its advertise address from; routing it over
// loopback gives it one while the namespace still has no way out.
func setUpLoopbackOnly() error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		// 192.0.2.0/24 is TEST-NET-1 (RFC 5737), never routed anywhere.
		{"addr", "add", "192.0.2.1/32", "dev", "lo"},
		{"route", "add", "default", "dev", "lo"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("set up the test network namespace: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// netnsUnavailable says why the tests cannot move into a network namespace of their own,
// or "" when they can.
func netnsUnavailable() string {
	if os.Geteuid() != 0 {
		return "not running as root"
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not found"
		}
	}
	// Containers without CAP_SYS_ADMIN refuse to create namespaces even for root.
	if out, err := exec.Command("unshare", "--net", "--", "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return fmt.Sprintf("unshare --net failed: %v: %s", err, out)
	}
	return ""
}

// runInNewNetns runs this test binary again, with the same arguments, in a new network
// namespace. unshare(1) execs the binary directly, so the child is the test binary
// itself and the namespace ends when it does.
func runInNewNetns() (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("find test binary: %w", err)
	}
	args := append([]string{"--net", "--", self}, os.Args[1:]...)
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), netnsEnv+"="+netnsInside)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(signals)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start tests in a new network namespace: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		select {
		case sig := <-signals:
			// The child runs the cleanups; it needs to hear about the interrupt.
			_ = cmd.Process.Signal(sig)
		case err := <-exited:
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				if status, ok := exit.Sys().(syscall.WaitStatus); ok && status.Signaled() {
					return 128 + int(status.Signal()), nil
				}
				return exit.ExitCode(), nil
			}
			if err != nil {
				return 0, fmt.Errorf("tests in a new network namespace: %w", err)
			}
			return 0, nil
		}
	}
}
