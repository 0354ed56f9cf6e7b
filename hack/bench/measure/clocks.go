package measure

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// CPUSeconds is the CPU time a process has used so far, user and system, read from
// its CPU clock to the nanosecond: /proc/<pid>/stat counts in 10 ms ticks, a tenth of
// a 100-write phase's API server CPU. The clock ID of another process's CPU clock is
// the kernel's encoding, which glibc's clock_getcpuclockid(3) computes and no Go
// library offers: the PID's complement shifted left by three, with CPUCLOCK_SCHED (2).
func CPUSeconds(pid int) float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(int32(^pid<<3|2), &ts); err != nil {
		return 0
	}
	return float64(ts.Nano()) / 1e9
}

// StolenSeconds is the CPU time the hypervisor gave to others while this machine's
// CPUs wanted to run (/proc/stat's steal column, summed over CPUs): phases hit by it
// are slower for reasons outside the bench.
func StolenSeconds() float64 {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0
	}
	stat, err := fs.Stat()
	if err != nil {
		return 0
	}
	return stat.CPUTotal.Steal
}

// MemoryKiB returns a process's resident size now and at its peak, in KiB.
func MemoryKiB(pid int) (rss, peak int64) {
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return 0, 0
	}
	status, err := proc.NewStatus()
	if err != nil {
		return 0, 0
	}
	return int64(status.VmRSS / 1024), int64(status.VmHWM / 1024)
}

// ResidentSplitKiB reads RssAnon and RssFile from /proc/<pid>/status (procfs does
// not parse them).
func ResidentSplitKiB(pid int) (anon, file int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, value, _ := strings.Cut(line, ":")
		kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch name {
		case "RssAnon":
			anon = kib
		case "RssFile":
			file = kib
		}
	}
	return anon, file
}

// ProcessCPU is the CPU time used so far by the bench and by each of its child
// processes (kube-apiserver, etcd, cmsync), by command name, and the time stolen.
func ProcessCPU() map[string]float64 {
	cpu := map[string]float64{"bench": CPUSeconds(os.Getpid()), "(stolen)": StolenSeconds()}
	procs, _ := procfs.AllProcs()
	for _, proc := range procs {
		if stat, err := proc.Stat(); err == nil && stat.PPID == os.Getpid() {
			cpu[stat.Comm] += CPUSeconds(proc.PID)
		}
	}
	return cpu
}
