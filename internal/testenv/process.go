package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one server binary run by a control plane.
type process struct {
	name    string
	path    string
	args    []string
	logPath string
	detach  bool
	// netns, when set, is the path of a network namespace the process runs in (through
	// nsenter, which execs it: the PID is the binary's).
	netns string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *process) start() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.path, p.args...)
	if p.netns != "" {
		cmd = exec.Command("nsenter", append([]string{"--net=" + p.netns, "--", p.path}, p.args...)...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if p.detach {
		// Outlive this process: a new session, and no death signal.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// Die with the test binary, even when it is killed.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close() // the start failed: that is the error to report
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() {
		p.err = cmd.Wait()
		_ = logf.Close() // the process has exited; its log is complete or lost either way
		close(p.done)
	}()
	return nil
}

// pid is the process's ID while it runs.
func (p *process) pid() (int, bool) {
	if p == nil || p.cmd == nil || p.exited() {
		return 0, false
	}
	return p.cmd.Process.Pid, true
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	if p.done == nil {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stopGrace is how long a process has to exit after SIGTERM before it is killed.
const stopGrace = 10 * time.Second

// stop terminates the process (SIGTERM, then SIGKILL after stopGrace) and waits for it.
func (p *process) stop() {
	if p.cmd == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// logTail returns the last n lines of the process log.
func (p *process) logTail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// pidFile records the PIDs of detached processes, one "name pid path" per line.
const pidFile = "pids"

func writePIDs(dir string, procs []*process) error {
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "%s %d %s\n", p.name, p.cmd.Process.Pid, p.path)
	}
	return os.WriteFile(filepath.Join(dir, pidFile), []byte(b.String()), 0o644)
}

type pidEntry struct {
	name, path string
	pid        int
}

// readPIDs reads the PID file in dir (none: no entries).
func readPIDs(dir string) ([]pidEntry, error) {
	data, err := os.ReadFile(filepath.Join(dir, pidFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []pidEntry
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		if pid, err := strconv.Atoi(f[1]); err == nil {
			out = append(out, pidEntry{name: f[0], pid: pid, path: f[2]})
		}
	}
	return out, nil
}

// stopPID sends SIGTERM to pid, then SIGKILL after grace, and waits until it is gone.
func stopPID(pid int, path string, grace time.Duration) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	waitGone(pid, path, grace)
}

// StopDetached stops the processes recorded in dir by a detached Start: each PID is
// signalled only if it still runs the binary that was started, so a recycled PID is
// never touched. A node is stopped first, and what it left on the machine removed. It
// returns how many processes it stopped.
func StopDetached(dir string, grace time.Duration) (int, error) {
	stopped, nodeErr := stopDetachedNode(dir, grace)
	pids, err := readPIDs(dir)
	if err != nil {
		return stopped, errors.Join(nodeErr, err)
	}
	// Stop in reverse start order: scheduler, controller manager, API server, etcd.
	for i := len(pids) - 1; i >= 0; i-- {
		if !runs(pids[i].pid, pids[i].path) {
			continue
		}
		stopPID(pids[i].pid, pids[i].path, grace)
		stopped++
	}
	if err := os.Remove(filepath.Join(dir, pidFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return stopped, errors.Join(nodeErr, err)
	}
	return stopped, nodeErr
}

func waitGone(pid int, path string, grace time.Duration) {
	deadline := time.Now().Add(grace)
	for runs(pid, path) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(grace)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runs reports whether pid is alive and executes path.
func runs(pid int, path string) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		// A zombie ("Z") has exited already.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return false
		}
	}
	return strings.TrimSuffix(exe, " (deleted)") == path
}
