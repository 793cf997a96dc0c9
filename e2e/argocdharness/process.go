package argocdharness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stopGrace is how long a process gets to exit after SIGTERM before its whole process
// group is killed.
const stopGrace = 10 * time.Second

// Process is one program the harness started. It runs in a process group of its own so
// that the programs it starts in turn (git, kustomize) are stopped with it.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	log     *os.File
	exited  chan struct{}
	waitErr error
}

// StartProcess starts a program next to Argo CD (the service under test) with exactly
// env as its environment, writing its output to the log directory. It is stopped by its
// process id when t ends.
func StartProcess(t testing.TB, name string, env []string, path string, args ...string) *Process {
	t.Helper()
	p, err := startProcess(name, logDir(t), env, path, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if m, err := p.Memory(); err == nil && p.running() {
			t.Logf("e2e: %s memory at the end: %s", p.name, m)
		}
		if t.Failed() {
			t.Logf("last lines of %s (%s):\n%s", p.name, p.logPath, p.LogTail(40))
		}
		if err := p.stop(); err != nil {
			t.Errorf("stop %v", err)
		}
	})
	return p
}

// logDir is where started programs write their output: KUKIE_E2E_LOG_DIR when set
// (kept for CI artifacts), else a directory removed with the test.
func logDir(t testing.TB) string {
	if dir := os.Getenv(logDirEnv); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("log dir: %v", err)
		}
		return dir
	}
	return t.TempDir()
}

// startProcess starts path with args and exactly env as its environment, writing its
// output to logDir/name.log.
func startProcess(name, logDir string, env []string, path string, args ...string) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log of %s: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// Should the test binary die without running its cleanups (a panic in another
		// goroutine, a kill -9), the kernel still stops the child.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, logPath: logPath, log: logFile, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// PID is the process id, which is also its process group id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// running reports whether the process has not exited yet.
func (p *Process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// exitError describes how the process ended, for a failure message.
func (p *Process) exitError() error {
	if p.running() {
		return nil
	}
	if p.waitErr == nil {
		return fmt.Errorf("%s (pid %d) exited", p.name, p.PID())
	}
	return fmt.Errorf("%s (pid %d) exited: %w", p.name, p.PID(), p.waitErr)
}

// stop ends the process group: SIGTERM, then SIGKILL after stopGrace. Whatever is left
// of the group after the leader exits is killed too.
func (p *Process) stop() error {
	pgid := p.PID()
	if p.running() {
		if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("terminate %s (pid %d): %w", p.name, pgid, err)
		}
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
		}
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s (pid %d): %w", p.name, pgid, err)
	}
	<-p.exited
	return p.log.Close()
}

// Memory is the resident set size of the process now and at its peak, from
// /proc/<pid>/status (VmRSS, VmHWM).
func (p *Process) Memory() (Memory, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID()), "status"))
	if err != nil {
		return Memory{}, fmt.Errorf("read memory of %s: %w", p.name, err)
	}
	var m Memory
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("parse %s of %s: %w", key, p.name, err)
		}
		switch key {
		case "VmRSS":
			m.RSS = kb * 1024
		case "VmHWM":
			m.PeakRSS = kb * 1024
		}
	}
	if m.RSS == 0 {
		return Memory{}, fmt.Errorf("read memory of %s: no VmRSS in /proc status", p.name)
	}
	return m, nil
}

// LogTail returns the last n lines of the process output.
func (p *Process) LogTail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(log of %s unreadable: %v)", p.name, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// WaitReady polls ready until it succeeds, the process exits, or ctx ends.
func (p *Process) WaitReady(ctx context.Context, ready func(context.Context) error) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%w before it was ready; last check: %v", p.exitError(), last)
		case <-ctx.Done():
			return fmt.Errorf("%s (pid %d) not ready: %w; last check: %v", p.name, p.PID(), ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// Memory is the resident memory of a process, in bytes.
type Memory struct {
	RSS     uint64
	PeakRSS uint64
}

func (m Memory) String() string {
	return fmt.Sprintf("rss %.0f MiB (peak %.0f MiB)", float64(m.RSS)/(1<<20), float64(m.PeakRSS)/(1<<20))
}

// freeLoopbackPort asks the kernel for a free TCP port on 127.0.0.1. For programs that
// take a port number rather than a listener there is no race-free way; the window
// between closing and the program binding is short.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
