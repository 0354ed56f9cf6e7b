// Command localcluster serves `make run`. With -reachable it exits 0 when the current
// kubeconfig reaches a cluster. Otherwise it starts the project's local control plane
// (the real kube-apiserver, etcd and kube-controller-manager the end-to-end suite uses)
// with the ConfigMapSync CRD installed,
// writes its kubeconfig to -kubeconfig-out and runs until interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
)

func main() {
	reachable := flag.Bool("reachable", false, "exit 0 if the current kubeconfig reaches a cluster, 1 if not")
	kubeconfig := flag.String("kubeconfig-out", ".cache/local/kubeconfig", "where to write the local control plane's kubeconfig")
	flag.Parse()
	if *reachable {
		os.Exit(probe())
	}
	if err := serve(*kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func probe() int {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return 1
	}
	cfg.Timeout = 3 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return 1
	}
	if _, err := dc.ServerVersion(); err != nil {
		return 1
	}
	return 0
}

func serve(kubeconfig string) error {
	kubeconfig, err := filepath.Abs(kubeconfig)
	if err != nil {
		return err
	}
	// The local control plane serves the ConfigMapSync CRD too, so both front doors work.
	env, err := controlplane.Start("deploy/crds")
	if err != nil {
		return err
	}
	defer env.Stop() //nolint:errcheck // best effort on the way out
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		return err
	}
	// The controllers a real cluster runs and the end-to-end suite runs too: without
	// them a deleted namespace stays Terminating for ever, and more.
	stopControllers, err := env.StartControllerManager(filepath.Dir(kubeconfig))
	if err != nil {
		return err
	}
	defer stopControllers()
	fmt.Printf("local control plane ready at %s\nuse it with: export KUBECONFIG=%s\n", env.Config.Host, kubeconfig)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	// Ctrl-C on make run signals this process and run.sh's trap signals it again: a
	// second signal must not cut the clean-up short and leave the control plane running.
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	return nil
}
