package node

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopOrder stops the kubelet before the containers it would restart, and the
// API server's clients before the API server.
var stopOrder = []string{"kube-proxy", "kubelet", "containers", "containerd", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"}

// Stop stops everything the node started and removes everything it made but its logs.
// It is safe to call on a node that is partly up, or that a killed run left behind.
func (n *Node) Stop() {
	for _, name := range stopOrder {
		if name == "containers" {
			n.killContainers()
			continue
		}
		n.stopPid(name)
	}
	n.unmountAll()
	removeCgroups()
	_ = run("ip", "netns", "delete", netnsName)
	_ = run("ip", "link", "delete", hostVeth) // gone with the namespace, unless that failed
	n.removeContainerLogLinks()
	n.removeHostLeftovers()
	entries, _ := os.ReadDir(n.o.Dir)
	for _, e := range entries {
		if e.Name() != "logs" {
			_ = os.RemoveAll(n.path(e.Name()))
		}
	}
}

// Close stops the node and lets another start.
func (n *Node) Close() {
	n.Stop()
	_ = n.lock.Close()
}

// stopPid stops the process named in Dir/pids/name, if it is still ours: SIGTERM, then
// SIGKILL after 15 s.
func (n *Node) stopPid(name string) {
	raw, err := os.ReadFile(n.path("pids", name))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || !n.ours(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for range 150 {
		if !n.ours(pid) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for range 50 {
		if !n.ours(pid) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ours tells whether pid is a live process of this node: its command line names the
// node's directory (a recycled pid does not).
func (n *Node) ours(pid int) bool {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(raw) == 0 {
		return false // gone, or a zombie waiting for its parent
	}
	return strings.Contains(string(raw), n.o.Dir)
}

// killContainers kills every process in the node's cgroups and every containerd shim
// serving the node's containerd: they outlive the kubelet and containerd by design.
func (n *Node) killContainers() {
	for _, pid := range cgroupPids() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(raw), "\x00")
		if !strings.Contains(string(raw), "containerd-shim") || !slices.Contains(args, n.containerdSocket()) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		// A shim killed outright leaves its socket, named by the hash of containerd's
		// address, the namespace and the shim's id (containerd's shim.SocketAddress).
		ns, id := argAfter(args, "-namespace"), argAfter(args, "-id")
		sum := sha256.Sum256([]byte(filepath.Join(n.containerdSocket(), ns, id)))
		defer func() { _ = os.Remove(filepath.Join("/run/containerd/s", hex.EncodeToString(sum[:]))) }() // gone already is fine
	}
	time.Sleep(200 * time.Millisecond)
}

// argAfter returns the argument following flag, or "".
func argAfter(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// cgroupHierarchies are the node's cgroup subtrees, one per mounted hierarchy.
func cgroupHierarchies() []string {
	var out []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		dir := filepath.Join("/sys/fs/cgroup", e.Name(), cgroupRoot)
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			out = append(out, dir)
		}
	}
	return out
}

// makeCgroupRoot creates the node's cgroup in every hierarchy: the kubelet requires it.
// A new cpuset cgroup starts with no CPUs and no memory nodes; it gets its parent's.
func makeCgroupRoot() error {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return err
	}
	for _, e := range entries {
		hierarchy := filepath.Join("/sys/fs/cgroup", e.Name())
		if st, err := os.Lstat(hierarchy); err != nil || !st.IsDir() {
			continue // a symlink such as cpu,cpuacct
		}
		dir := filepath.Join(hierarchy, cgroupRoot)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if e.Name() == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(hierarchy, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func cgroupPids() []int {
	var pids []int
	for _, root := range cgroupHierarchies() {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			raw, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(raw)) {
				if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removeCgroups removes the node's cgroup subtrees, deepest first; a cgroup whose last
// process is still exiting is retried.
func removeCgroups() {
	for range 20 {
		left := 0
		for _, root := range cgroupHierarchies() {
			var dirs []string
			_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				if os.Remove(dirs[i]) != nil {
					left++
				}
			}
		}
		if left == 0 {
			return
		}
		for _, pid := range cgroupPids() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// unmountAll detaches every mount under the node's directory (overlay snapshots, Pod
// volumes, Pod network namespaces), deepest first.
func (n *Node) unmountAll() {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		p := unescapeMount(fields[4])
		if strings.HasPrefix(p, n.o.Dir+"/") {
			points = append(points, p)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeContainerLogLinks removes the kubelet's links in /var/log/containers (a path it
// does not let us move) that point into the node's directory.
func (n *Node) removeContainerLogLinks() {
	entries, _ := os.ReadDir("/var/log/containers")
	for _, e := range entries {
		link := filepath.Join("/var/log/containers", e.Name())
		if target, err := os.Readlink(link); err == nil && strings.HasPrefix(target, n.o.Dir+"/") {
			_ = os.Remove(link)
		}
	}
}

// removeHostLeftovers removes what the node's programs write outside its directory
// because they do not let it be moved: the CNI library's result cache entries of the
// node's sandboxes, the kubelet's device-plugin socket, and containerd's shim and runc
// state directories when empty (killContainers removes the shims' sockets).
func (n *Node) removeHostLeftovers() {
	sandboxes, _ := os.ReadDir(n.path("containerd", "root", "io.containerd.grpc.v1.cri", "sandboxes"))
	results, _ := os.ReadDir("/var/lib/cni/results")
	for _, r := range results {
		for _, sb := range sandboxes {
			if strings.Contains(r.Name(), sb.Name()) {
				_ = os.Remove(filepath.Join("/var/lib/cni/results", r.Name()))
			}
		}
	}
	_ = os.Remove("/var/lib/kubelet/device-plugins/kubelet.sock")
	for _, dir := range []string{"/var/lib/kubelet/device-plugins", "/var/lib/kubelet", "/var/lib/cni/results", "/var/lib/cni",
		"/run/containerd/runc/k8s.io", "/run/containerd/runc", "/run/containerd/s", "/run/containerd"} {
		_ = os.Remove(dir) // only when empty
	}
}
