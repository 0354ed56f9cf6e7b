//go:build e2e

// Package e2e drives the real cmsync binary, as a separate process, against a real
// control plane — kube-apiserver, etcd and kube-controller-manager (so namespaces finish
// deleting and the garbage collector honours owner references) — only through the
// public interface of docs/reference.md. The chart is installed with helm, and the controller
// authenticates with a token of the chart's ServiceAccount, so the chart's RBAC is
// what it runs under: a missing verb fails the suite.
package e2e

import (
	"bufio"
	"context"
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

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
	"github.com/cmsync/cmsync/internal/testsupport/testkit"
)

const (
	releaseNamespace = "cmsync-system"
	serviceAccount   = "cmsync" // the chart's ServiceAccount for release "cmsync"
)

var (
	workDir          string
	adminKubeconfig  string // cluster administrator: arranges and asserts
	cmsyncKubeconfig string // the chart's ServiceAccount: what cmsync runs as
	// plainKubeconfig authenticates as plainServiceAccount, bound to the chart's
	// ClusterRole as rendered with secrets.enabled=false.
	plainKubeconfig string
	auditLog        string // the API server's audit log of cmsync's identities
	k8s             client.Client
	clientset       *kubernetes.Clientset
	cmsyncBinary    string
	helmBinary      string
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// existingCluster is set by `make kind-e2e`: the suite then runs against the cluster of
// $KUBECONFIG, where the chart is already installed and cmsync runs as a Pod. Scenarios
// that need to start, flag or kill a local cmsync process are skipped there.
var existingCluster = os.Getenv("CMSYNC_E2E_EXISTING_CLUSTER") != ""

func run(m *testing.M) (int, error) {
	cmsyncBinary, helmBinary = os.Getenv("CMSYNC_BIN"), os.Getenv("HELM")
	if helmBinary == "" || (cmsyncBinary == "" && !existingCluster) {
		return 0, fmt.Errorf("CMSYNC_BIN and HELM must be set: run `make e2e`")
	}
	var err error
	if workDir, err = os.MkdirTemp("", "cmsync-e2e-"); err != nil {
		return 0, err
	}
	if existingCluster {
		return runOnExistingCluster(m)
	}
	if os.Getenv("CMSYNC_E2E_KEEP") == "" {
		defer func() { _ = os.RemoveAll(workDir) }()
	} else {
		fmt.Fprintln(os.Stderr, "e2e: keeping", workDir)
	}

	auditLog = filepath.Join(workDir, "audit.log")
	env, err := controlplane.StartWith(controlplane.Options{AuditLog: auditLog, AuditAllFrom: []string{cmsyncUser, plainUser, standbyUser}})
	if err != nil {
		return 0, err
	}
	defer env.Stop() //nolint:errcheck // the first kube-apiserver may be gone after a chaos restart
	defer stopRestarted()
	apiServerPort = env.Config.Host[strings.LastIndex(env.Config.Host, ":")+1:]
	apiServerPort = strings.TrimSuffix(apiServerPort, "/")
	adminKubeconfig = filepath.Join(workDir, "admin.kubeconfig")
	if err := os.WriteFile(adminKubeconfig, env.KubeConfig, 0o600); err != nil {
		return 0, err
	}
	if err := newClients(env.Config); err != nil {
		return 0, err
	}
	stopKCM, err := env.StartControllerManager(workDir)
	if err != nil {
		return 0, err
	}
	defer stopKCM()

	// Secrets on, so the chart grants the Secret verbs the Secret scenarios use (the
	// least-privilege audit at the end checks each of them is used).
	if out, err := helm("install", "cmsync", "../../deploy/chart/cmsync", "--namespace", releaseNamespace, "--create-namespace", "--wait=false",
		"--set", "secrets.enabled=true"); err != nil {
		return 0, fmt.Errorf("helm install: %v\n%s", err, out)
	}
	// The API server loads the chart's admission policy through a watch: every scenario
	// runs with it in force.
	if err := waitUntil(30*time.Second, func() error { return expectProtection(true) }); err != nil {
		return 0, fmt.Errorf("the chart's admission policy never took effect: %w", err)
	}
	if cmsyncKubeconfig, err = serviceAccountKubeconfig(serviceAccount); err != nil {
		return 0, err
	}
	if err := createPlainIdentity(); err != nil {
		return 0, err
	}
	if plainKubeconfig, err = serviceAccountKubeconfig(plainServiceAccount); err != nil {
		return 0, err
	}
	code := m.Run()
	if code == 0 && fullRun() {
		if err := checkLeastPrivilege(); err != nil {
			return 1, err
		}
	}
	return code, nil
}

func runOnExistingCluster(m *testing.M) (int, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return 0, err
	}
	adminKubeconfig = os.Getenv("KUBECONFIG")
	if err := newClients(cfg); err != nil {
		return 0, err
	}
	if err := waitUntil(30*time.Second, func() error { return expectProtection(true) }); err != nil {
		return 0, fmt.Errorf("the chart's admission policy is not in force: %w", err)
	}
	return m.Run(), nil
}

// waitUntil retries check until it returns nil or the timeout passes, outside a test.
func waitUntil(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// adminRESTConfig is the administrator's connection, for clients of other identities.
var adminRESTConfig *rest.Config

func adminConfig(t *testing.T) *rest.Config {
	t.Helper()
	if adminRESTConfig == nil {
		t.Fatal("no admin connection")
	}
	return adminRESTConfig
}

func newClients(cfg *rest.Config) error {
	adminRESTConfig = cfg
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	var err error
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	clientset, err = kubernetes.NewForConfig(cfg)
	return err
}

func helm(args ...string) (string, error) {
	cmd := exec.Command(helmBinary, append(args, "--kubeconfig", adminKubeconfig)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(workDir, "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(workDir, "helm-config"), "HELM_DATA_HOME="+filepath.Join(workDir, "helm-data"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates with a token of the
// ServiceAccount sa of the release's namespace.
func serviceAccountKubeconfig(sa string) (string, error) {
	ctx := context.Background()
	var token *authenticationv1.TokenRequest
	var err error
	for range 50 { // the ServiceAccount may still be on its way from helm
		token, err = clientset.CoreV1().ServiceAccounts(releaseNamespace).CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(6 * 3600))}}, metav1.CreateOptions{})
		if err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return "", fmt.Errorf("token for ServiceAccount %s: %w", sa, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: adminRESTConfig.Host, CertificateAuthorityData: adminRESTConfig.CAData}
	cfg.AuthInfos["cmsync"] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	cfg.Contexts["cmsync"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "cmsync"}
	cfg.CurrentContext = "cmsync"
	path := filepath.Join(workDir, sa+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// controller is one cmsync process.
type controller struct {
	cmd         *exec.Cmd
	metricsAddr string
	healthAddr  string
	log         string
	exited      chan struct{}
}

// startController runs the cmsync binary with the chart's defaults plus args, as the
// chart's ServiceAccount, and stops it when the test ends. On an existing cluster the
// in-cluster Pod is the controller, and a scenario needing flags is skipped.
func startController(t *testing.T, args ...string) *controller {
	t.Helper()
	return startControllerWithEnv(t, nil, args...)
}

// startControllerWithEnv is startController with extra environment variables.
func startControllerWithEnv(t *testing.T, env []string, args ...string) *controller {
	t.Helper()
	if existingCluster {
		if len(args) > 0 || len(env) > 0 {
			t.Skip("needs a local cmsync process with flags", args, "(run by make e2e)")
		}
		return &controller{}
	}
	return launchController(t, launch{env: env}, args...)
}

// launch says how to run a cmsync process: with extra environment variables, and
// inside a network namespace, whose addresses its endpoints must then listen on.
type launch struct {
	env                     []string
	netns                   string
	metricsAddr, healthAddr string
}

func launchController(t *testing.T, how launch, args ...string) *controller {
	t.Helper()
	c := &controller{metricsAddr: how.metricsAddr, healthAddr: how.healthAddr, exited: make(chan struct{})}
	if c.metricsAddr == "" {
		addrs := freeAddrs(t, 2)
		c.metricsAddr, c.healthAddr = addrs[0], addrs[1]
	}
	env := how.env
	c.log = filepath.Join(workDir, fmt.Sprintf("cmsync-%s-%s.log", strings.ReplaceAll(t.Name(), "/", "_"), randomSuffix()))
	logFile, err := os.Create(c.log)
	must(t, err)
	all := append([]string{
		"--kubeconfig=" + cmsyncKubeconfig,
		"--metrics-bind-address=" + c.metricsAddr,
		"--health-probe-bind-address=" + c.healthAddr,
		"--leader-election-namespace=" + releaseNamespace,
		"--conflict-recheck-interval=2s",
	}, args...)
	c.cmd = exec.Command(cmsyncBinary, all...)
	if how.netns != "" {
		// nsenter enters the namespace and execs cmsync: the pid signalled is cmsync's.
		c.cmd = exec.Command("nsenter", append([]string{"--net=/run/netns/" + how.netns, "--", cmsyncBinary}, all...)...)
	}
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	must(t, c.cmd.Start())
	go func() {
		_, _ = c.cmd.Process.Wait()
		_ = logFile.Close()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("cmsync log %s:\n%s", c.log, tail(c.log, 40))
		}
	})
	// A client of its own: no proxy from the environment, no connection kept from an
	// earlier process at the same address, a timeout per probe.
	probe := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	eventually(t, 30*time.Second, "cmsync healthy", func() error {
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
func (c *controller) Stop() {
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

// skipOnExistingCluster skips a scenario that kills or runs several local processes.
func skipOnExistingCluster(t *testing.T) {
	if existingCluster {
		t.Skip("needs local cmsync processes (run by make e2e)")
	}
}

// local skips the rest of a scenario that must stop, kill or scrape a local process.
func (c *controller) local(t *testing.T) {
	if c.cmd == nil {
		t.Skip("the rest needs a local cmsync process (run by make e2e)")
	}
}

// Kill sends SIGKILL: no cleanup, no lease release.
func (c *controller) Kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// Metrics returns the Prometheus text the process serves.
func (c *controller) Metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + c.metricsAddr + "/metrics")
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(body)
}

// Metric returns the value of the sample whose line starts with prefix (name and
// labels as printed), or -1 when absent.
func (c *controller) Metric(t *testing.T, prefix string) float64 {
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

func freeAddr(t *testing.T) string {
	return freeAddrs(t, 1)[0]
}

// freeAddrs returns n distinct free loopback addresses. Every listener stays open until
// all are picked: one closed before the next is picked may be handed out again, and a
// process given the same port for metrics and health probes exits at start.
func freeAddrs(t *testing.T, n int) []string {
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		defer func() { _ = l.Close() }()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// --- helpers shared by the scenarios ---

func ptr[T any](v T) *T { return &v }

// deleteSourcesAtEnd deletes, when the test ends, every source in the given namespaces
// and the named ConfigMapSyncs, so that later scenarios count only their own sources.
func deleteSourcesAtEnd(t *testing.T, namespaces []string, syncs ...string) {
	t.Cleanup(func() {
		ctx := context.Background()
		labelled := client.MatchingLabels{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue}
		for _, ns := range namespaces {
			_ = k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns), labelled)
			_ = k8s.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(ns), labelled)
		}
		for _, name := range syncs {
			_ = k8s.Delete(ctx, &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	})
}

func newNamespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + randomSuffix(), Labels: labels}}
	must(t, k8s.Create(context.Background(), ns))
	return ns.Name
}

func getConfigMap(namespace, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	return cm, k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, cm)
}

// replicasOf lists, by the API, the namespaces holding a replica of namespace/name
// under the source's own name.
func replicasOf(t *testing.T, namespace, name string) []string {
	t.Helper()
	return replicasNamed(t, namespace+"/"+name, name)
}

// replicasNamed lists, by the API, the namespaces holding a ConfigMap named name that
// is a replica of source ("<namespace>/<name>").
func replicasNamed(t *testing.T, source, name string) []string {
	t.Helper()
	var list corev1.ConfigMapList
	must(t, k8s.List(context.Background(), &list, client.MatchingLabels{v1alpha1.ManagedByLabel: "cmsync"}))
	var out []string
	for _, cm := range list.Items {
		if cm.Name == name && cm.Annotations[v1alpha1.SourceAnnotation] == source {
			out = append(out, cm.Namespace)
		}
	}
	return out
}

func waitForReplicas(t *testing.T, namespace, name string, timeout time.Duration, want ...string) {
	t.Helper()
	eventually(t, timeout, "replicas of "+namespace+"/"+name, func() error {
		if got := replicasOf(t, namespace, name); !sameSet(got, want) {
			return fmt.Errorf("%d replicas in %v, want %d", len(got), truncateList(got), len(want))
		}
		return nil
	})
}

// waitForValue waits until the ConfigMap name in every namespace has data[key] = value.
func waitForValue(t *testing.T, timeout time.Duration, name, key, value string, namespaces ...string) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%s=%q in %d replicas of %s", key, value, len(namespaces), name), func() error {
		for _, ns := range namespaces {
			r, err := getConfigMap(ns, name)
			if err != nil {
				return err
			}
			if r.Data[key] != value {
				return fmt.Errorf("%s: %s=%q", ns, key, r.Data[key])
			}
		}
		return nil
	})
}

func truncateList(l []string) []string {
	if len(l) > 10 {
		return append(l[:10:10], "...")
	}
	return l
}

func waitForAnnotation(t *testing.T, namespace, name, key, value string) *corev1.ConfigMap {
	t.Helper()
	var got *corev1.ConfigMap
	eventually(t, 30*time.Second, fmt.Sprintf("%s=%s on %s/%s", key, value, namespace, name), func() error {
		cm, err := getConfigMap(namespace, name)
		if err != nil {
			return err
		}
		if cm.Annotations[key] != value {
			return fmt.Errorf("%s=%q (message %q)", key, cm.Annotations[key], cm.Annotations[v1alpha1.MessageAnnotation])
		}
		got = cm
		return nil
	})
	return got
}

// The shared helpers, under the names these tests use.
var (
	eventually   = testkit.Eventually
	consistently = testkit.Consistently
	sameSet      = testkit.SameSet
	randomSuffix = testkit.RandomSuffix
	must         = testkit.Must
)

// apiServerPort identifies this suite's kube-apiserver among processes; restarted ones
// are stopped when the suite ends.
var (
	apiServerPort     string
	apiServerRestarts []*exec.Cmd
	// apiServerStarting holds, per restart of kube-apiserver, the time from its stop
	// until it was ready again.
	apiServerStarting []span
)

// span is a stretch of time, ends included.
type span struct{ from, to time.Time }

func (s span) holds(at time.Time) bool { return !at.Before(s.from) && !at.After(s.to) }

// findProcess returns the pid and arguments of this suite's process named name.
func findProcess(t *testing.T, name string) (int, []string) {
	t.Helper()
	return findProcessWith(t, name, func(arg string) bool { return arg == "--secure-port="+apiServerPort })
}

func startProcess(t *testing.T, args []string) *exec.Cmd {
	t.Helper()
	logFile, err := os.Create(filepath.Join(workDir, filepath.Base(args[0])+"-restarted.log"))
	must(t, err)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	must(t, cmd.Start())
	return cmd
}

func stopRestarted() {
	for _, cmd := range apiServerRestarts {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		exited := make(chan struct{})
		go func() { _, _ = cmd.Process.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(gracefulStop):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
}

// gracefulStop is how long a stopped control-plane process may take to end before it
// is killed: a kube-apiserver whose clients stopped reading (a partitioned or frozen
// cmsync) can wait on them far longer in its graceful shutdown.
const gracefulStop = 15 * time.Second

// terminate stops the process pid with SIGTERM, and SIGKILL after gracefulStop; it
// returns once the process has ended (gone, or a zombie waiting for its parent).
func terminate(t *testing.T, pid int) {
	t.Helper()
	must(t, syscall.Kill(pid, syscall.SIGTERM))
	if waitForEnd(pid, gracefulStop) {
		return
	}
	t.Logf("pid %d still running %s after SIGTERM: SIGKILL", pid, gracefulStop)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if !waitForEnd(pid, gracefulStop) {
		t.Fatalf("pid %d survived SIGKILL", pid)
	}
}

func waitForEnd(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if state := procState(pid); state == "" || state == "Z" { // gone, or a zombie
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// procState is the state letter of /proc/<pid>/stat, "" when there is none.
func procState(pid int) string {
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
