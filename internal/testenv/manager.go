package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
)

// Manager is a liqo-auth-manager process started for a test or a benchmark.
type Manager struct {
	cmd  *exec.Cmd
	done chan struct{}
	logs *managerLogs
}

// StartManager runs the liqo-auth-manager binary bin with args and returns once the
// manager says it holds its Lease (through leader election, or without it), with an error
// if it exits or timeout passes first.
func StartManager(bin string, args []string, timeout time.Duration) (*Manager, error) {
	cmd := exec.Command(bin, args...)
	logs := &managerLogs{acquired: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting liqo-auth-manager: %w", err)
	}
	m := &Manager{cmd: cmd, done: make(chan struct{}), logs: logs}
	go func() { _ = cmd.Wait(); close(m.done) }()
	select {
	case <-logs.acquired:
		return m, nil
	case <-m.done:
		return nil, fmt.Errorf("liqo-auth-manager exited before holding its Lease:\n%s", logs)
	case <-time.After(timeout):
		m.Stop()
		return nil, fmt.Errorf("liqo-auth-manager did not hold its Lease within %s:\n%s", timeout, logs)
	}
}

// Stop ends the manager gracefully, so that it releases its Lease; it is killed if it
// has not exited after 15 s. Stopping a stopped manager does nothing.
func (m *Manager) Stop() {
	select {
	case <-m.done:
		return
	default:
	}
	_ = m.cmd.Process.Signal(os.Interrupt)
	select {
	case <-m.done:
	case <-time.After(15 * time.Second):
		m.Kill()
	}
}

// Kill ends the manager abruptly, as a crash would: its Lease is not released.
func (m *Manager) Kill() {
	_ = m.cmd.Process.Kill()
	<-m.done
}

// Done is closed when the manager process has exited.
func (m *Manager) Done() <-chan struct{} { return m.done }

// Pid is the manager's process ID.
func (m *Manager) Pid() int { return m.cmd.Process.Pid }

// Logs is everything the manager has written so far.
func (m *Manager) Logs() string { return m.logs.String() }

// managerLogs keeps a manager's output and closes acquired when it first says it holds
// its Lease: leader election logs "successfully acquired lease", manager.Presence
// "acquired lease to announce this manager".
type managerLogs struct {
	mu       sync.Mutex
	b        bytes.Buffer
	acquired chan struct{}
	seen     bool
}

func (l *managerLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.b.Write(p)
	if !l.seen && bytes.Contains(bytes.ToLower(l.b.Bytes()), []byte("acquired lease")) {
		l.seen = true
		close(l.acquired)
	}
	return n, err
}

func (l *managerLogs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
