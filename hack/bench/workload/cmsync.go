package workload

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cmsync/cmsync/hack/bench/measure"
	"github.com/cmsync/cmsync/hack/bench/report"
)

// Cmsync says how the bench runs cmsync: the binary, the kubeconfig it runs with,
// flags and environment added to every start, and where its logs go.
type Cmsync struct {
	Binary, Kubeconfig, LogDir string
	Args, Env                  []string
}

// Process is one running cmsync, its resident size's peak sampled every 100 ms.
type Process struct {
	// MetricsAddr serves its metrics (and its profiles, with --profiling).
	MetricsAddr string
	cmd         *exec.Cmd
	peakRSS     atomic.Int64
	done        chan struct{}
}

// Start runs cmsync with args and env added, and waits for its /readyz.
func (c Cmsync) Start(env []string, args ...string) (*Process, error) {
	metrics, err := FreePort()
	if err != nil {
		return nil, err
	}
	health, err := FreePort()
	if err != nil {
		return nil, err
	}
	args = append([]string{"--kubeconfig=" + c.Kubeconfig, "--metrics-bind-address=" + metrics, "--health-probe-bind-address=" + health}, args...)
	cmd := exec.Command(c.Binary, append(args, c.Args...)...)
	// cmsync dies with the bench, also when a failed check exits it at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(append(os.Environ(), c.Env...), env...)
	logFile, err := os.Create(filepath.Join(c.LogDir, fmt.Sprintf("cmsync-%d.log", time.Now().UnixNano())))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{}), MetricsAddr: metrics}
	go p.sampleRSS()
	for {
		resp, err := http.Get("http://" + health + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *Process) sampleRSS() {
	for {
		select {
		case <-p.done:
			return
		case <-time.After(100 * time.Millisecond):
			if _, hwm := measure.MemoryKiB(p.cmd.Process.Pid); hwm > p.peakRSS.Load() {
				p.peakRSS.Store(hwm)
			}
		}
	}
}

// Memory is the process's resident size now, split, and at its peak.
func (p *Process) Memory() report.Memory {
	rss, peak := measure.MemoryKiB(p.cmd.Process.Pid)
	anon, file := measure.ResidentSplitKiB(p.cmd.Process.Pid)
	return report.Memory{
		SteadyMiB: float64(rss) / 1024,
		PeakMiB:   float64(max(p.peakRSS.Load(), peak)) / 1024,
		AnonMiB:   float64(anon) / 1024,
		FileMiB:   float64(file) / 1024,
	}
}

// Stop stops cmsync as Kubernetes stops a Pod, and waits for its end.
func (p *Process) Stop() {
	close(p.done)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_, _ = p.cmd.Process.Wait()
}

// CPUSeconds is the CPU time the process has used so far.
func (p *Process) CPUSeconds() float64 { return measure.CPUSeconds(p.cmd.Process.Pid) }

// FreePort is a local address no one listens on.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}
