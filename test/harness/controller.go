//go:build e2e

package harness

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmsync/cmsync/internal/testsupport/testkit"
)

// Controller is one cmsync process.
type Controller struct {
	cmd         *exec.Cmd
	MetricsAddr string
	healthAddr  string
	LogPath     string
	exited      chan struct{}
}

// StartController runs the cmsync binary with the chart's defaults plus args, as the
// chart's ServiceAccount, and stops it when the test ends. On an existing cluster the
// in-cluster Pod is the controller, and a scenario needing flags is skipped.
func StartController(t *testing.T, args ...string) *Controller {
	t.Helper()
	return StartControllerWithEnv(t, nil, args...)
}

// StartControllerWithEnv is startController with extra environment variables.
func StartControllerWithEnv(t *testing.T, env []string, args ...string) *Controller {
	t.Helper()
	if ExistingCluster {
		if len(args) > 0 || len(env) > 0 {
			t.Skip("needs a local cmsync process with flags", args, "(run by make e2e)")
		}
		return &Controller{}
	}
	return LaunchController(t, Launch{Env: env}, args...)
}

// Launch says how to run a cmsync process: with extra environment variables, and
// inside a network namespace, whose addresses its endpoints must then listen on.
type Launch struct {
	// Binary is the cmsync binary to run; "": the one under test (CMSYNC_BIN).
	Binary                  string
	Env                     []string
	Netns                   string
	MetricsAddr, HealthAddr string
}

// LaunchController runs cmsync as how says, with the chart's defaults plus args, as
// the chart's ServiceAccount, waits until it is healthy, and stops it when the test ends.
func LaunchController(t *testing.T, how Launch, args ...string) *Controller {
	t.Helper()
	c := &Controller{MetricsAddr: how.MetricsAddr, healthAddr: how.HealthAddr, exited: make(chan struct{})}
	if c.MetricsAddr == "" {
		addrs := FreeAddrs(t, 2)
		c.MetricsAddr, c.healthAddr = addrs[0], addrs[1]
	}
	env := how.Env
	c.LogPath = filepath.Join(WorkDir, fmt.Sprintf("cmsync-%s-%s.log", strings.ReplaceAll(t.Name(), "/", "_"), testkit.RandomSuffix()))
	logFile, err := os.Create(c.LogPath)
	testkit.Must(t, err)
	all := append([]string{
		"--kubeconfig=" + CmsyncKubeconfig,
		"--metrics-bind-address=" + c.MetricsAddr,
		"--health-probe-bind-address=" + c.healthAddr,
		"--leader-election-namespace=" + ReleaseNamespace,
		"--conflict-recheck-interval=2s",
	}, args...)
	binary := cmp.Or(how.Binary, CmsyncBinary)
	c.cmd = exec.Command(binary, all...)
	if how.Netns != "" {
		// nsenter enters the namespace and execs cmsync: the pid signalled is cmsync's.
		c.cmd = exec.Command("nsenter", append([]string{"--net=/run/netns/" + how.Netns, "--", binary}, all...)...)
	}
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	testkit.Must(t, c.cmd.Start())
	go func() {
		_, _ = c.cmd.Process.Wait()
		_ = logFile.Close()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("cmsync log %s:\n%s", c.LogPath, Tail(c.LogPath, 40))
		}
	})
	// A client of its own: no proxy from the environment, no connection kept from an
	// earlier process at the same address, a timeout per probe.
	probe := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	testkit.Eventually(t, 30*time.Second, "cmsync healthy", func() error {
		resp, err := probe.Get("http://" + c.healthAddr + "/healthz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("healthz %d (%s): %q", resp.StatusCode, resp.Header.Get("Server"), body)
		}
		return nil
	})
	return c
}

// Stop sends SIGTERM and waits.
func (c *Controller) Stop() {
	if c.cmd == nil {
		return
	}
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// SkipOnExistingCluster skips a scenario that kills or runs several local processes.
func SkipOnExistingCluster(t *testing.T) {
	if ExistingCluster {
		t.Skip("needs local cmsync processes (run by make e2e)")
	}
}

// Local skips the rest of a scenario that must stop, kill or scrape a Local process.
func (c *Controller) Local(t *testing.T) {
	if c.cmd == nil {
		t.Skip("the rest needs a local cmsync process (run by make e2e)")
	}
}

// IsLocal tells whether the controller is a local process (not the in-cluster Pod).
func (c *Controller) IsLocal() bool { return c.cmd != nil }

// Pid is the local process's pid.
func (c *Controller) Pid() int { return c.cmd.Process.Pid }

// Kill sends SIGKILL: no cleanup, no lease release.
func (c *Controller) Kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// Metrics returns the Prometheus text the process serves.
func (c *Controller) Metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + c.MetricsAddr + "/metrics")
	testkit.Must(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	testkit.Must(t, err)
	return string(body)
}

// Metric returns the value of the sample whose line starts with prefix (name and
// labels as printed), or -1 when absent.
func (c *Controller) Metric(t *testing.T, prefix string) float64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(c.Metrics(t)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var total float64 = -1
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, prefix) && (len(line) > len(prefix) && (line[len(prefix)] == ' ' || line[len(prefix)] == '{' || line[len(prefix)] == ',')) {
			var v float64
			fields := strings.Fields(line)
			_, _ = fmt.Sscan(fields[len(fields)-1], &v) // not a number: 0, which fails the caller's check
			if total < 0 {
				total = 0
			}
			total += v
		}
	}
	return total
}

// Freeze stops the process as a long GC pause or a stopped VM would: it keeps its
// connections and its state, and runs on from where it stopped when thawed.
func (c *Controller) Freeze(t *testing.T) { testkit.Must(t, c.cmd.Process.Signal(syscall.SIGSTOP)) }

// Thaw sends SIGCONT to a frozen process.
func (c *Controller) Thaw(t *testing.T) { testkit.Must(t, c.cmd.Process.Signal(syscall.SIGCONT)) }

// HasExited reports whether the process has ended.
func (c *Controller) HasExited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// FreeAddr is a free loopback address.
func FreeAddr(t *testing.T) string {
	return FreeAddrs(t, 1)[0]
}

// FreeAddrs returns n distinct free loopback addresses. Every listener stays open until
// all are picked: one closed before the next is picked may be handed out again, and a
// process given the same port for metrics and health probes exits at start.
func FreeAddrs(t *testing.T, n int) []string {
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		testkit.Must(t, err)
		defer func() { _ = l.Close() }()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

// Tail is the last n lines of the file at path.
func Tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
