// Command localnode serves `make local-node` and `make node-e2e`: it brings up the
// single-node cluster of package test/node, writes "ready" to -dir/ready when the node
// is Ready, and on SIGINT or SIGTERM stops everything it started and cleans up.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cmsync/cmsync/internal/testsupport/node"
)

func main() {
	var o node.Options
	var images string
	flag.StringVar(&o.Dir, "dir", ".cache/node", "directory for everything the node writes (logs stay in dir/logs)")
	flag.StringVar(&o.KubeBin, "kube-bin", "", "directory with etcd and the Kubernetes binaries (hack/control-plane-binaries.sh node)")
	flag.StringVar(&o.ContainerdBin, "containerd-bin", "", "directory with containerd, containerd-shim-runc-v2 and ctr")
	flag.StringVar(&o.CNIBin, "cni-bin", "/usr/lib/cni", "directory with the CNI plugins")
	flag.StringVar(&o.Runc, "runc", "/usr/sbin/runc", "runc binary")
	flag.StringVar(&images, "images", "", "comma-separated image tarballs to import (one must be "+node.SandboxImage+")")
	flag.StringVar(&o.RegistryBin, "registry-bin", "", "the CNCF distribution registry, run inside the node on "+node.RegistryHost+" (empty: none)")
	flag.Parse()
	if images != "" {
		o.Images = strings.Split(images, ",")
	}
	o.Log = os.Stderr
	if err := serve(o); err != nil {
		fmt.Fprintln(os.Stderr, "localnode:", err)
		os.Exit(1)
	}
}

func serve(o node.Options) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	ready := filepath.Join(o.Dir, "ready")
	_ = os.Remove(ready)
	n, err := node.Start(ctx, o)
	if err != nil {
		return err
	}
	defer n.Close()
	if err := os.WriteFile(ready, []byte("ready\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "localnode: the node is Ready; in another shell: export KUBECONFIG=%s (Ctrl-C stops and cleans up)\n", n.Kubeconfig)
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "localnode: stopping and cleaning up")
	return nil
}
