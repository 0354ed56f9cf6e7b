//go:build e2e

package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
)

// The faults the model checker (model_test.go) injects between and during its users'
// operations. Each is named, repeatable, and bounded in time; all run on loopback.

// standbyServiceAccount is a second identity for cmsync with the chart's grants, so that
// the audit log tells the two leader-elected processes of the model checker apart.
const (
	standbyServiceAccount = "cmsync-standby"
	standbyUser           = "system:serviceaccount:" + harness.ReleaseNamespace + ":" + standbyServiceAccount
)

// createStandbyIdentity creates standbyServiceAccount, bound to the chart's ClusterRole
// and leader-election Role as installed.
func createStandbyIdentity() error {
	ctx := context.Background()
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: harness.ReleaseNamespace, Name: standbyServiceAccount}}
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: harness.ReleaseNamespace, Name: standbyServiceAccount}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: standbyServiceAccount},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: harness.ServiceAccount},
			Subjects:   subjects,
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: harness.ReleaseNamespace, Name: standbyServiceAccount},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: harness.ServiceAccount + "-leader-election"},
			Subjects:   subjects,
		},
	}
	for _, obj := range objs {
		if err := harness.K8s.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// --- the partition: a TCP relay that can stop carrying anything ---

// partitionProxy relays one cmsync process's connections to the API server. Cut, it
// accepts nothing and carries no byte in either direction, as a network partition
// would (no reset: the client finds out only by its own timeouts). Healed, it closes
// the connections the partition caught, as the partition's length would have (client-go
// gives up on a silent connection after 45 s), so no request held during the partition
// is delivered after it.
type partitionProxy struct {
	listener net.Listener
	target   string

	mu    sync.Mutex
	cut   bool
	held  chan struct{} // closed on heal
	conns map[net.Conn]bool
}

func startPartitionProxy(t *testing.T, listen, target string) *partitionProxy {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(listen, "0"))
	must(t, err)
	p := &partitionProxy{listener: l, target: target, conns: map[net.Conn]bool{}, held: make(chan struct{})}
	go p.serve()
	t.Cleanup(func() { _ = l.Close(); p.closeAll() })
	return p
}

func (p *partitionProxy) addr() string { return p.listener.Addr().String() }

func (p *partitionProxy) serve() {
	for {
		conn, err := p.listener.Accept()
		if err != nil {
			return
		}
		go p.relay(conn)
	}
}

func (p *partitionProxy) relay(conn net.Conn) {
	if !p.waitConnected() { // accepted during the partition: never answered
		_ = conn.Close()
		return
	}
	upstream, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = conn.Close()
		return
	}
	p.mu.Lock()
	p.conns[conn], p.conns[upstream] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if !p.waitConnected() {
					break // the connection was caught by the partition
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}
	go pipe(upstream, conn)
	go pipe(conn, upstream)
	<-done
	_ = conn.Close()
	_ = upstream.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, conn)
	delete(p.conns, upstream)
	p.mu.Unlock()
}

// waitConnected blocks while the partition lasts; it reports false when the caller's
// connection lived through a partition and must be dropped.
func (p *partitionProxy) waitConnected() bool {
	p.mu.Lock()
	if !p.cut {
		p.mu.Unlock()
		return true
	}
	held := p.held
	p.mu.Unlock()
	<-held
	return false
}

// partition cuts the relay.
func (p *partitionProxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		p.cut, p.held = true, make(chan struct{})
	}
}

// heal carries again; the connections the partition caught are closed.
func (p *partitionProxy) heal() {
	p.mu.Lock()
	if !p.cut {
		p.mu.Unlock()
		return
	}
	p.cut = false
	close(p.held)
	p.mu.Unlock()
	p.closeAll()
}

func (p *partitionProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// kubeconfigVia writes a copy of kubeconfig whose server is the proxy; the API
// server's certificate is still checked for its own address.
func kubeconfigVia(t *testing.T, kubeconfig string, p *partitionProxy) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	must(t, err)
	for _, cluster := range cfg.Clusters {
		cluster.Server = "https://" + p.addr()
		cluster.TLSServerName = "127.0.0.1"
	}
	path := filepath.Join(harness.WorkDir, fmt.Sprintf("via-%s-%s.kubeconfig", strings.TrimSuffix(filepath.Base(kubeconfig), ".kubeconfig"), randomSuffix()))
	must(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// --- the partition: a dropped route out of a network namespace of the project's own ---

// netnsLink is a network namespace for one cmsync process, joined to the host by a
// veth pair with addresses of its own (10.202.<i>.0/30); the process reaches the API
// server through a relay on the host's end. Cutting it deletes the routes between the
// two: the kernel drops what either sends, new connections fail, and what TCP holds is
// retransmitted once the routes are back — a real partition.
type netnsLink struct {
	name, hostVeth, nsVeth, hostIP, nsIP, subnet string
	starts                                       int
}

// endpoints gives each process started in the namespace metrics and health ports of its
// own, so a probe can never be answered by a listener of the process before it.
func (l *netnsLink) endpoints() (metrics, health string) {
	l.starts++
	port := 20000 + 2*l.starts
	return net.JoinHostPort(l.nsIP, strconv.Itoa(port)), net.JoinHostPort(l.nsIP, strconv.Itoa(port+1))
}

// partitionByRoute tells whether the partition is a dropped route (CHAOS_PARTITION=netns,
// as root) rather than the relay's cut.
func partitionByRoute(t *testing.T) bool {
	if os.Getenv("CHAOS_PARTITION") != "netns" {
		return false
	}
	if os.Geteuid() != 0 {
		t.Fatal("CHAOS_PARTITION=netns needs root (network namespaces and routes)")
	}
	return true
}

//nolint:goconst // the words of ip(8) command lines read best as the commands themselves
func newNetnsLink(t *testing.T, i int) *netnsLink {
	t.Helper()
	l := &netnsLink{name: fmt.Sprintf("cmsync-chaos-%d", i), hostVeth: fmt.Sprintf("cmc%dh", i), nsVeth: fmt.Sprintf("cmc%dn", i),
		hostIP: fmt.Sprintf("10.202.%d.1", i), nsIP: fmt.Sprintf("10.202.%d.2", i), subnet: fmt.Sprintf("10.202.%d.0/30", i)}
	// Left by a run that was killed: the host's end of the pair outlives the namespace's
	// name while a process still holds the namespace.
	_ = runCommand("ip", "netns", "delete", l.name)
	_ = runCommand("ip", "link", "delete", l.hostVeth)
	for _, args := range [][]string{
		{"ip", "netns", "add", l.name},
		{"ip", "link", "add", l.hostVeth, "type", "veth", "peer", "name", l.nsVeth},
		{"ip", "link", "set", l.nsVeth, "netns", l.name},
		{"ip", "addr", "add", l.hostIP + "/30", "dev", l.hostVeth},
		{"ip", "link", "set", l.hostVeth, "up"},
		{"ip", "-n", l.name, "link", "set", "lo", "up"},
		{"ip", "-n", l.name, "addr", "add", l.nsIP + "/30", "dev", l.nsVeth},
		{"ip", "-n", l.name, "link", "set", l.nsVeth, "up"},
	} {
		must(t, runCommand(args[0], args[1:]...))
	}
	t.Cleanup(func() { _ = runCommand("ip", "netns", "delete", l.name) }) // takes the veth pair with it
	return l
}

// cut deletes the routes between the namespace and the host on both ends: a one-sided
// cut lets the process still hear the API server's watch events and act on them, its
// writes held by TCP and delivered once the route is back — after another process has
// taken over (the model checker saw exactly that, answered 504).
func (l *netnsLink) cut() error {
	return errors.Join(runCommand("ip", "-n", l.name, "route", "del", l.subnet), runCommand("ip", "route", "del", l.subnet, "dev", l.hostVeth))
}

func (l *netnsLink) heal() error {
	return errors.Join(runCommand("ip", "-n", l.name, "route", "add", l.subnet, "dev", l.nsVeth, "src", l.nsIP),
		runCommand("ip", "route", "add", l.subnet, "dev", l.hostVeth, "src", l.hostIP))
}

func runCommand(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// apiServerAddr is the API server's host:port.
func apiServerAddr() string {
	return strings.TrimSuffix(strings.TrimPrefix(harness.AdminRESTConfig.Host, "https://"), "/")
}

// --- freezing a process ---

// --- etcd ---

// restartEtcd stops the suite's etcd and starts it again with the same arguments and
// data, as a real restart would; the API server reconnects by itself.
func restartEtcd(t *testing.T, down time.Duration) {
	t.Helper()
	_, apiArgs := harness.FindProcess(t, "kube-apiserver")
	var etcdURL string
	for _, a := range apiArgs {
		if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
			etcdURL = strings.Split(v, ",")[0]
		}
	}
	if etcdURL == "" {
		t.Fatal("kube-apiserver has no --etcd-servers")
	}
	pid, args := harness.FindProcessWith(t, "etcd", func(arg string) bool {
		return strings.HasPrefix(arg, "--listen-client-urls=") && strings.Contains(arg, strings.TrimPrefix(etcdURL, "http://"))
	})
	harness.Terminate(t, pid)
	time.Sleep(down)
	harness.APIServerRestarts = append(harness.APIServerRestarts, harness.StartProcess(t, args))
	eventually(t, 60*time.Second, "etcd back behind the API server", func() error {
		_, err := harness.Clientset.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{})
		return err
	})
}

// --- API Priority and Fairness ---

// throttling puts both cmsync identities' writes of replicas and sources in a priority
// level of one seat with short queues, so that most of a fan-out's writes are answered
// 429. The Lease and the informers' lists and watches keep their own level, so
// leadership does not change hands.
var throttling = controlplane.Throttle{
	Name: "cmsync-chaos-throttle", Users: []string{harness.CmsyncUser, standbyUser}, Queues: 4, HandSize: 1, QueueLength: 2,
	Rules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"create", "update", "patch", "delete"},
		APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Namespaces: []string{"*"}}},
}

func throttle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(t, throttling.Apply(ctx, harness.Clientset))
}

func unthrottle(t *testing.T) {
	t.Helper()
	must(t, throttling.Remove(context.Background(), harness.Clientset))
}

// --- the audit log, read as it grows ---

func isCmsync(user string) bool { return user == harness.CmsyncUser || user == standbyUser }

// TestFrozenLeaderWritesNothing is the model checker's frozen-leader fault on a fixed
// history: the leader freezes in the middle of fan-outs, users change every source
// while it sleeps, another process takes over; woken up, the old leader must not send
// one write. Before the lease fence it patched the sources' status and recorded Events
// from what it had decided before it froze.
func TestFrozenLeaderWritesNothing(t *testing.T) {
	harness.SkipOnExistingCluster(t)
	must(t, createStandbyIdentity())
	var before, during []mcOp
	for i := range poolSize {
		before = append(before, mcOp{Kind: "create-namespace", Slot: i, Tier: []string{"x", ""}[i%2]})
	}
	before = append(before, mcOp{Kind: "create-source", Slot: 0, Value: "1", Entries: []string{"n*"}},
		mcOp{Kind: "create-sync", Entries: []string{"n*", "!n4"}})
	during = []mcOp{
		{Kind: "update-source", Slot: 0, Value: "2"},
		{Kind: "update-sync-source", Value: "2"},
		{Kind: "create-source", Slot: 2, Value: "secret", Tier: "x", Entries: []string{"n0"}},
		{Kind: "retarget-source", Slot: 0, Entries: []string{"n[0-2]"}},
		{Kind: "label-namespace", Slot: 1, Tier: "x"},
		{Kind: "ignore-namespace", Slot: 0},
		{Kind: "delete-namespace", Slot: 3},
	}
	figures := chaosFigures{Faults: map[string]int{}}
	harness.WithoutProtection(t, func() {
		mc := newModelChecker(t, 0, &figures)
		defer mc.stopAll()
		h := history{Fault: "frozen-leader", Ops: append(before, during...)}
		if violations, _ := mc.run(h, "frozen leader"); len(violations) > 0 {
			t.Errorf("after the frozen leader woke up:\n  %s", strings.Join(violations, "\n  "))
		}
	})
	if figures.StaleLeaderWrites != 0 {
		t.Errorf("the old leader wrote %d times after the takeover", figures.StaleLeaderWrites)
	}
}
