// Package node runs a single-node Kubernetes cluster built from source on this machine:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy and a
// kubelet with containerd and runc, so that Pods run for real (`make local-node`,
// `make node-e2e`).
//
// Everything lives under one directory and one network namespace. Every process is
// started with a pid file and dies with its parent; Stop (also run first, to sweep up
// after a run that was killed) stops processes by pid, kills what is left in the node's
// cgroups and containerd shims, unmounts what the node mounted, removes its cgroups and
// deletes the network namespace, which takes the bridge and iptables rules with it.
package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options say where the binaries are and what to load.
type Options struct {
	// Dir holds everything the node writes. Logs stay in Dir/logs after Stop.
	Dir string
	// KubeBin holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
	// kubelet and kube-proxy (hack/control-plane-binaries.sh node).
	KubeBin string
	// ContainerdBin holds containerd, containerd-shim-runc-v2 and ctr.
	ContainerdBin string
	// CNIBin holds the bridge, host-local, loopback and portmap plugins.
	CNIBin string
	// Runc is the runc binary.
	Runc string
	// Images are image tarballs to import into containerd's k8s.io namespace; one of
	// them must be SandboxImage.
	Images []string
	// RegistryBin, when set, is the CNCF distribution registry, run on RegistryHost for
	// images the kubelet pulls (see startRegistry).
	RegistryBin string
	// Log receives progress lines.
	Log io.Writer
}

// Node is a running single-node cluster.
type Node struct {
	o          Options
	pki        *pki
	lock       *os.File                 // held while the node exists
	exited     map[string]chan struct{} // closed when the named process exits
	Kubeconfig string                   // cluster administrator, reaching the API server from the host
	Clientset  *kubernetes.Clientset
}

// Start brings the node up and returns when it is Ready. On error it has cleaned up.
func Start(ctx context.Context, o Options) (_ *Node, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a real node needs root (network namespace, mounts, cgroups)")
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return nil, err
	}
	// The network namespace and cgroup names are the machine's: one node at a time.
	lock, err := os.OpenFile("/run/cmsync-node.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = lock.Close()
		return nil, errors.New("another node is running on this machine (make local-node or make node-e2e); stop it first")
	}
	n := &Node{o: o, lock: lock, exited: map[string]chan struct{}{}}
	n.Stop() // what a killed earlier run left behind
	defer func() {
		if err != nil {
			n.logf("start failed: %v; cleaning up (logs in %s)", err, n.path("logs"))
			n.Close()
		}
	}()
	for _, d := range []string{"logs", "pids", "etcd", "containerd", "kubelet", "cni/net.d", "cni/ipam", "pod-logs"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return nil, err
		}
	}
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"network namespace", n.startNetwork},
		{"certificates", n.writePKI},
		{"etcd and kube-apiserver", n.startControlPlane},
		{"kube-controller-manager, kube-scheduler", n.startControllers},
		{"image registry", n.startRegistry},
		{"containerd and images", n.startContainerd},
		{"kubelet and kube-proxy", n.startKubelet},
		{"node Ready", n.waitNodeReady},
	}
	for _, s := range steps {
		n.logf("%s", s.name)
		if err := s.run(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return n, nil
}

func (n *Node) logf(format string, args ...any) {
	if n.o.Log != nil {
		_, _ = fmt.Fprintf(n.o.Log, "node: "+format+"\n", args...)
	}
}

// run runs a short command and returns its error with its output.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// inNetns runs a short command inside the node's network namespace.
func inNetns(args ...string) error {
	return run("nsenter", append([]string{"--net=/run/netns/" + netnsName, "--"}, args...)...)
}

//nolint:goconst // the words of ip(8) command lines read best as the commands themselves
func (n *Node) startNetwork(context.Context) error {
	for _, args := range [][]string{
		{"ip", "netns", "add", netnsName},
		{"ip", "link", "add", hostVeth, "type", "veth", "peer", "name", nodeVeth},
		{"ip", "link", "set", nodeVeth, "netns", netnsName},
		{"ip", "addr", "add", hostIP + "/" + vethPrefixLen, "dev", hostVeth},
		{"ip", "link", "set", hostVeth, "up"},
	} {
		if err := run(args[0], args[1:]...); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", nodeIP + "/" + vethPrefixLen, "dev", nodeVeth},
		{"ip", "link", "set", nodeVeth, "up"},
		{"ip", "route", "add", "default", "via", hostIP},
		// Pods reach Services through this namespace's routing and kube-proxy's rules.
		{"sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"},
	} {
		if err := inNetns(args...); err != nil {
			return err
		}
	}
	// Only needed for Pod-to-Service-to-same-Pod hairpins; not every kernel has it.
	_ = inNetns("sh", "-c", "echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables")
	return nil
}

func (n *Node) writePKI(context.Context) error {
	var err error
	n.pki, err = newPKI(n.path("pki"),
		[]net.IP{net.ParseIP(nodeIP), net.ParseIP(kubernetesSvc), net.ParseIP("127.0.0.1")},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[nodeName] = &clientcmdapi.Cluster{Server: "https://" + nodeIP + ":6443", CertificateAuthority: n.pki.path("ca.crt")}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificate: n.pki.path("admin.crt"), ClientKey: n.pki.path("admin.key")}
	cfg.Contexts[nodeName] = &clientcmdapi.Context{Cluster: nodeName, AuthInfo: "admin"}
	cfg.CurrentContext = nodeName
	n.Kubeconfig = n.path("kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, n.Kubeconfig); err != nil {
		return err
	}
	rest, err := clientcmd.BuildConfigFromFlags("", n.Kubeconfig)
	if err != nil {
		return err
	}
	n.Clientset, err = kubernetes.NewForConfig(rest)
	return err
}

// start runs a long-lived process of the node inside its network namespace, logging to
// Dir/logs/name.log, with a pid file, killed if this process dies.
func (n *Node) start(name, bin string, env []string, args ...string) error {
	logFile, err := os.Create(n.path("logs", name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + netnsName, "--", bin}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	exited := make(chan struct{})
	n.exited[name] = exited
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(exited) }()
	return os.WriteFile(n.path("pids", name), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

func (n *Node) kube(name string) string { return filepath.Join(n.o.KubeBin, name) }

func (n *Node) startControlPlane(ctx context.Context) error {
	if err := n.start("etcd", n.kube("etcd"), nil,
		"--data-dir="+n.path("etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--unsafe-no-fsync"); err != nil {
		return err
	}
	p := n.pki.path
	if err := n.start("kube-apiserver", n.kube("kube-apiserver"), nil,
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0", "--secure-port=6443", "--advertise-address="+nodeIP,
		"--service-cluster-ip-range="+serviceCIDR,
		"--client-ca-file="+p("ca.crt"),
		"--tls-cert-file="+p("apiserver.crt"), "--tls-private-key-file="+p("apiserver.key"),
		"--kubelet-client-certificate="+p("admin.crt"), "--kubelet-client-key="+p("admin.key"),
		"--service-account-key-file="+p("sa.key"), "--service-account-signing-key-file="+p("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--kubelet-preferred-address-types=InternalIP",
		"--authorization-mode=RBAC", "--allow-privileged=true"); err != nil {
		return err
	}
	return n.waitHTTPS(ctx, "https://"+nodeIP+":6443/readyz", 90*time.Second)
}

// waitHTTPS polls url with the administrator's certificate until it answers 200.
func (n *Node) waitHTTPS(ctx context.Context, url string, timeout time.Duration) error {
	cert, err := tls.LoadX509KeyPair(n.pki.path("admin.crt"), n.pki.path("admin.key"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(n.pki.caCert)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	return n.poll(ctx, timeout, func() error {
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	})
}

func (n *Node) startControllers(context.Context) error {
	if err := n.start("kube-controller-manager", n.kube("kube-controller-manager"), nil,
		"--kubeconfig="+n.Kubeconfig,
		"--authentication-kubeconfig="+n.Kubeconfig, "--authorization-kubeconfig="+n.Kubeconfig,
		"--service-account-private-key-file="+n.pki.path("sa.key"), "--root-ca-file="+n.pki.path("ca.crt"),
		"--use-service-account-credentials=true", "--leader-elect=false", "--secure-port=0"); err != nil {
		return err
	}
	return n.start("kube-scheduler", n.kube("kube-scheduler"), nil,
		"--kubeconfig="+n.Kubeconfig,
		"--authentication-kubeconfig="+n.Kubeconfig, "--authorization-kubeconfig="+n.Kubeconfig,
		"--leader-elect=false", "--secure-port=0")
}

func (n *Node) startContainerd(ctx context.Context) error {
	config := n.path("containerd", "config.toml")
	if err := os.WriteFile(config, []byte(n.containerdConfig()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(n.path("cni", "net.d", "10-cmsync-node.conflist"), []byte(n.cniConfig()), 0o644); err != nil {
		return err
	}
	// containerd finds its shim on PATH.
	path := "PATH=" + n.o.ContainerdBin + ":" + os.Getenv("PATH")
	if err := n.start("containerd", filepath.Join(n.o.ContainerdBin, "containerd"), []string{path}, "--config="+config); err != nil {
		return err
	}
	ctr := filepath.Join(n.o.ContainerdBin, "ctr")
	if err := n.poll(ctx, 30*time.Second, func() error { return run(ctr, "--address="+n.containerdSocket(), "version") }); err != nil {
		return err
	}
	for _, image := range n.o.Images {
		if err := run(ctr, "--address="+n.containerdSocket(), "--namespace=k8s.io", "images", "import", image); err != nil {
			return err
		}
	}
	// ctr import says nothing when an image's platform does not match: check the names.
	out, err := exec.Command(ctr, "--address="+n.containerdSocket(), "--namespace=k8s.io", "images", "ls", "-q").Output()
	if err != nil {
		return err
	}
	if !slices.Contains(strings.Fields(string(out)), SandboxImage) {
		return fmt.Errorf("the pause image %s is not in containerd after import (have: %s)", SandboxImage, strings.Fields(string(out)))
	}
	return nil
}

func (n *Node) startKubelet(context.Context) error {
	if err := makeCgroupRoot(); err != nil {
		return err
	}
	config := n.path("kubelet", "config.yaml")
	if err := os.WriteFile(config, []byte(n.kubeletConfig()), 0o644); err != nil {
		return err
	}
	if err := n.start("kubelet", n.kube("kubelet"), nil,
		"--config="+config, "--kubeconfig="+n.Kubeconfig,
		"--root-dir="+n.path("kubelet"), "--cert-dir="+n.path("kubelet", "pki"),
		"--hostname-override="+nodeName, "--node-ip="+nodeIP); err != nil {
		return err
	}
	return n.start("kube-proxy", n.kube("kube-proxy"), nil,
		"--kubeconfig="+n.Kubeconfig, "--hostname-override="+nodeName,
		"--proxy-mode=iptables", "--cluster-cidr="+podCIDR,
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256")
}

func (n *Node) waitNodeReady(ctx context.Context) error {
	return n.poll(ctx, 120*time.Second, func() error {
		node, err := n.Clientset.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status != corev1.ConditionTrue {
					return fmt.Errorf("node not Ready: %s", c.Message)
				}
				return nil
			}
		}
		return errors.New("node has no Ready condition yet")
	})
}

// poll calls f until it succeeds, the time is up, or a process of the node has exited.
func (n *Node) poll(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		for name, exited := range n.exited {
			select {
			case <-exited:
				return fmt.Errorf("%s exited; the end of %s:\n%s", name, n.path("logs", name+".log"), tailFile(n.path("logs", name+".log"), 15))
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func tailFile(path string, lines int) string {
	raw, _ := os.ReadFile(path)
	all := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
