package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// controllers are the kube-controller-manager controllers a cluster needs for cmsync to
// meet it as users do: namespaces really finish deleting, owner references are honoured
// (a deleted ConfigMapSync's replicas), the built-in admin, edit and view roles get their
// rules, every namespace gets its default ServiceAccount and the kube-root-ca.crt
// ConfigMap. Each runs under a ServiceAccount of its own, as in a kubeadm cluster: those
// are the identities the chart's admission policy lets delete replicas.
var controllers = []string{"namespace", "garbagecollector", "clusterrole-aggregation", "serviceaccount", "root-ca-certificate-publisher-controller"}

// StartControllerManager runs kube-controller-manager (from KUBEBUILDER_ASSETS) against
// the control plane, writing its kubeconfig, CA and log into dir. The returned function
// stops it.
func (e *Env) StartControllerManager(dir string) (stop func(), err error) {
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager")
	kubeconfig, ca := filepath.Join(dir, "admin.kubeconfig"), filepath.Join(dir, "ca.crt")
	if len(e.Config.CAData) == 0 {
		return nil, errors.New("the control plane's config has no CA")
	}
	for file, content := range map[string][]byte{kubeconfig: e.KubeConfig, ca: e.Config.CAData} {
		if err := os.WriteFile(file, content, 0o600); err != nil {
			return nil, err
		}
	}
	log, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		"--root-ca-file="+ca,
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=true",
	)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_, _ = cmd.Process.Wait()
		_ = log.Close()
	}, nil
}
