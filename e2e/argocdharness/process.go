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
	"time"
)

// stopGrace is how long a process gets to exit after SIGTERM before its whole process
// group is killed.
const stopGrace = 10 * time.Second

// process is one program the harness started. It runs in a process group of its own so
// that the programs it starts in turn (git, kustomize) are stopped with it.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	log     *os.File
	exited  chan struct{}
	waitErr error
}

// startProcess starts path with args and env (added to a minimal environment), writing
// its output to logDir/name.log.
func startProcess(name, logDir string, env []string, path string, args ...string) (*process, error) {
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
	p := &process{name: name, cmd: cmd, logPath: logPath, log: logFile, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// pid is the process id, which is also its process group id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// running reports whether the process has not exited yet.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// exitError describes how the process ended, for a failure message.
func (p *process) exitError() error {
	if p.running() {
		return nil
	}
	if p.waitErr == nil {
		return fmt.Errorf("%s (pid %d) exited", p.name, p.pid())
	}
	return fmt.Errorf("%s (pid %d) exited: %w", p.name, p.pid(), p.waitErr)
}

// stop ends the process group: SIGTERM, then SIGKILL after stopGrace. Whatever is left
// of the group after the leader exits is killed too.
func (p *process) stop() error {
	pgid := p.pid()
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

// memory is the resident set size of the process now and at its peak, from
// /proc/<pid>/status (VmRSS, VmHWM).
func (p *process) memory() (Memory, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid()), "status"))
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

// logTail returns the last n lines of the process output.
func (p *process) logTail(n int) string {
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

// waitReady polls ready until it succeeds, the process exits, or ctx ends.
func (p *process) waitReady(ctx context.Context, ready func(context.Context) error) error {
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
			return fmt.Errorf("%s (pid %d) not ready: %w; last check: %v", p.name, p.pid(), ctx.Err(), last)
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
