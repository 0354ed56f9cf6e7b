//go:build e2e

// Package harness runs the end-to-end suites (test/e2e, test/chaos) against a real
// control plane — kube-apiserver, etcd and kube-controller-manager (so namespaces finish
// deleting and the garbage collector honours owner references) — with the chart
// installed by helm and cmsync run as the real binary, a separate process that
// authenticates with a token of the chart's ServiceAccount: the chart's RBAC is what
// it runs under. It holds what both suites share: the start, the clients, cmsync's
// processes, the audit log, the admission policy's probe and the control plane's
// processes.
package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
)

const (
	ReleaseNamespace = "cmsync-system"
	Release          = "cmsync"
	ServiceAccount   = Release // the chart's ServiceAccount for release "cmsync"
	// CmsyncUser is who the chart's ServiceAccount authenticates as.
	CmsyncUser = "system:serviceaccount:" + ReleaseNamespace + ":" + ServiceAccount
)

var (
	WorkDir          string
	AdminKubeconfig  string // cluster administrator: arranges and asserts
	CmsyncKubeconfig string // the chart's ServiceAccount: what cmsync runs as
	AuditLog         string // the API server's audit log of cmsync's identities
	K8s              client.Client
	Clientset        *kubernetes.Clientset
	CmsyncBinary     string
	HelmBinary       string
	// Chart is the chart HelmChart installs and upgrades to: the working tree's, unless
	// a suite's Prepare points it at another (the upgrade suite's first release).
	Chart = "../../deploy/chart/cmsync"
)

// ExistingCluster is set by `make kind-e2e`: the suite then runs against the cluster of
// $KUBECONFIG, where the chart is already installed and cmsync runs as a Pod. Scenarios
// that need to start, flag or kill a local cmsync process are skipped there.
var ExistingCluster = os.Getenv("CMSYNC_E2E_EXISTING_CLUSTER") != ""

// Suite says how a suite's control plane and chart are set up, and what it does
// before and after its tests.
type Suite struct {
	// Name prefixes the suite's messages and its work directory.
	Name string
	// AuditUsers are the identities whose every request the API server's audit log
	// records (cmsync's own first).
	AuditUsers []string
	// ChartValues are the --set values of the chart's install.
	ChartValues []string
	// ProbeNamespace is where the admission policy is probed, one it covers; "":
	// default.
	ProbeNamespace string
	// Prepare runs before the chart's install, Before once the chart is installed and
	// cmsync's kubeconfig written, After when every test passed. None runs on an
	// existing cluster.
	Prepare, Before, After func() error
}

// Main runs the suite's tests on a control plane of their own (or on the existing
// cluster) and exits with their result.
func Main(m *testing.M, s Suite) {
	// The suite's clients log what the API server warns of (a deprecated field, say).
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	code, err := s.run(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func (s Suite) run(m *testing.M) (int, error) {
	if s.ProbeNamespace != "" {
		probeNamespace = s.ProbeNamespace
	}
	CmsyncBinary, HelmBinary = os.Getenv("CMSYNC_BIN"), os.Getenv("HELM")
	if HelmBinary == "" || (CmsyncBinary == "" && !ExistingCluster) {
		return 0, fmt.Errorf("CMSYNC_BIN and HELM must be set: run `make e2e`")
	}
	var err error
	if WorkDir, err = os.MkdirTemp("", "cmsync-"+s.Name+"-"); err != nil {
		return 0, err
	}
	if ExistingCluster {
		return runOnExistingCluster(m)
	}
	if os.Getenv("CMSYNC_E2E_KEEP") == "" {
		defer func() { _ = os.RemoveAll(WorkDir) }()
	} else {
		fmt.Fprintln(os.Stderr, s.Name+": keeping", WorkDir)
	}
	stop, err := s.start()
	defer stop()
	if err != nil {
		return 0, err
	}
	if s.Before != nil {
		if err := s.Before(); err != nil {
			return 0, err
		}
	}
	code := m.Run()
	if code == 0 && s.After != nil {
		if err := s.After(); err != nil {
			return 1, err
		}
	}
	return code, nil
}

// start starts the control plane, kube-controller-manager and the chart, and returns
// the function that stops them.
func (s Suite) start() (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	AuditLog = filepath.Join(WorkDir, "audit.log")
	env, err := controlplane.StartWith(controlplane.Options{AuditLog: AuditLog, AuditAllFrom: s.AuditUsers})
	if err != nil {
		return stop, err
	}
	stops = append(stops, func() { _ = env.Stop() }, StopRestarted) // the first kube-apiserver may be gone after a restart
	APIServerPort = strings.TrimSuffix(env.Config.Host[strings.LastIndex(env.Config.Host, ":")+1:], "/")
	AdminKubeconfig = filepath.Join(WorkDir, "admin.kubeconfig")
	if err := os.WriteFile(AdminKubeconfig, env.KubeConfig, 0o600); err != nil {
		return stop, err
	}
	if err := newClients(env.Config); err != nil {
		return stop, err
	}
	stopKCM, err := env.StartControllerManager(WorkDir)
	if err != nil {
		return stop, err
	}
	stops = append(stops, stopKCM)
	if s.Prepare != nil {
		if err := s.Prepare(); err != nil {
			return stop, err
		}
	}
	return stop, s.installChart()
}

// installChart installs the chart, waits for its admission policy, and writes the
// kubeconfig of its ServiceAccount.
func (s Suite) installChart() error {
	if err := HelmChart("install", "--create-namespace", s.ChartValues...); err != nil {
		return err
	}
	// The API server loads the chart's admission policy through a watch: every scenario
	// runs with it in force.
	if err := WaitUntil(30*time.Second, func() error { return ExpectProtection(true) }); err != nil {
		return fmt.Errorf("the chart's admission policy never took effect: %w", err)
	}
	var err error
	CmsyncKubeconfig, err = ServiceAccountKubeconfig(ServiceAccount)
	return err
}

// HelmChart installs or upgrades (verb) the chart as release cmsync, with option (a helm
// flag, or "") and values (--set key=value each), without waiting.
func HelmChart(verb, option string, values ...string) error {
	args := []string{verb, Release, Chart, "--namespace", ReleaseNamespace, "--wait=false"}
	if option != "" {
		args = append(args, option)
	}
	for _, v := range values {
		args = append(args, "--set", v)
	}
	if out, err := Helm(args...); err != nil {
		return fmt.Errorf("helm %s: %v\n%s", verb, err, out)
	}
	return nil
}

func runOnExistingCluster(m *testing.M) (int, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return 0, err
	}
	AdminKubeconfig = os.Getenv("KUBECONFIG")
	if err := newClients(cfg); err != nil {
		return 0, err
	}
	if err := WaitUntil(30*time.Second, func() error { return ExpectProtection(true) }); err != nil {
		return 0, fmt.Errorf("the chart's admission policy is not in force: %w", err)
	}
	return m.Run(), nil
}

// WaitUntil retries check until it returns nil or the timeout passes, outside a test.
func WaitUntil(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// AdminRESTConfig is the administrator's connection, for clients of other identities.
var AdminRESTConfig *rest.Config

// AdminConfig is the administrator's connection; the test fails without one.
func AdminConfig(t *testing.T) *rest.Config {
	t.Helper()
	if AdminRESTConfig == nil {
		t.Fatal("no admin connection")
	}
	return AdminRESTConfig
}

func newClients(cfg *rest.Config) error {
	AdminRESTConfig = cfg
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	var err error
	if K8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	Clientset, err = kubernetes.NewForConfig(cfg)
	return err
}

// Helm runs helm as the administrator, its caches in the work directory.
func Helm(args ...string) (string, error) {
	cmd := exec.Command(HelmBinary, append(args, "--kubeconfig", AdminKubeconfig)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(WorkDir, "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(WorkDir, "helm-config"), "HELM_DATA_HOME="+filepath.Join(WorkDir, "helm-data"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates with a token of the
// ServiceAccount sa of the release's namespace.
func ServiceAccountKubeconfig(sa string) (string, error) {
	ctx := context.Background()
	var token *authenticationv1.TokenRequest
	var err error
	for range 50 { // the ServiceAccount may still be on its way from helm
		token, err = Clientset.CoreV1().ServiceAccounts(ReleaseNamespace).CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: Ptr(int64(6 * 3600))}}, metav1.CreateOptions{})
		if err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return "", fmt.Errorf("token for ServiceAccount %s: %w", sa, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: AdminRESTConfig.Host, CertificateAuthorityData: AdminRESTConfig.CAData}
	cfg.AuthInfos["cmsync"] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	cfg.Contexts["cmsync"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "cmsync"}
	cfg.CurrentContext = "cmsync"
	path := filepath.Join(WorkDir, sa+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}
