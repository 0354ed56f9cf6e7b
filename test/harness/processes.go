//go:build e2e

package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmsync/cmsync/internal/testsupport/testkit"
)

// APIServerPort identifies this suite's kube-apiserver among processes; restarted ones
// are stopped when the suite ends.
var (
	APIServerPort     string
	APIServerRestarts []*exec.Cmd
)

// FindProcess returns the pid and arguments of this suite's process named name.
func FindProcess(t *testing.T, name string) (int, []string) {
	t.Helper()
	return FindProcessWith(t, name, func(arg string) bool { return arg == "--secure-port="+APIServerPort })
}

// FindProcessWith returns the pid and arguments of this suite's process named name,
// told apart from other suites' by one of its arguments.
func FindProcessWith(t *testing.T, name string, isOurs func(arg string) bool) (int, []string) {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	testkit.Must(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(args[0]) == name && slices.ContainsFunc(args, isOurs) {
			return pid, args
		}
	}
	t.Fatalf("no %s process of this suite", name)
	return 0, nil
}

// StartProcess starts args again (a restarted control-plane process), its log in the
// work directory.
func StartProcess(t *testing.T, args []string) *exec.Cmd {
	t.Helper()
	logFile, err := os.Create(filepath.Join(WorkDir, filepath.Base(args[0])+"-restarted.log"))
	testkit.Must(t, err)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	testkit.Must(t, cmd.Start())
	return cmd
}

// StopRestarted stops the control-plane processes started again by the suite.
func StopRestarted() {
	for _, cmd := range APIServerRestarts {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		exited := make(chan struct{})
		go func() { _, _ = cmd.Process.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(GracefulStop):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
}

// GracefulStop is how long a stopped control-plane process may take to end before it
// is killed: a kube-apiserver whose clients stopped reading (a partitioned or frozen
// cmsync) can wait on them far longer in its graceful shutdown.
const GracefulStop = 15 * time.Second

// Terminate stops the process pid with SIGTERM, and SIGKILL after gracefulStop; it
// returns once the process has ended (gone, or a zombie waiting for its parent).
func Terminate(t *testing.T, pid int) {
	t.Helper()
	testkit.Must(t, syscall.Kill(pid, syscall.SIGTERM))
	if WaitForEnd(pid, GracefulStop) {
		return
	}
	t.Logf("pid %d still running %s after SIGTERM: SIGKILL", pid, GracefulStop)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if !WaitForEnd(pid, GracefulStop) {
		t.Fatalf("pid %d survived SIGKILL", pid)
	}
}

// WaitForEnd tells whether the process pid ended (gone, or a zombie) within timeout.
func WaitForEnd(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if state := ProcState(pid); state == "" || state == "Z" { // gone, or a zombie
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// ProcState is the state letter of /proc/<pid>/stat, "" when there is none.
func ProcState(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces, the state follows its ')'.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return string(stat[i+2])
	}
	return ""
}
