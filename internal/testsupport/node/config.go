package node

import (
	"fmt"
	"path/filepath"
)

// The node's addresses. The node lives in a network namespace of its own, joined to the
// host by a veth pair, so that its bridge, routes and kube-proxy's iptables rules never
// touch the host's and vanish with the namespace.
const (
	netnsName     = "cmsync-node"
	hostVeth      = "cmsync-h"
	nodeVeth      = "cmsync-n"
	hostIP        = "10.201.0.1"
	nodeIP        = "10.201.0.2"
	vethPrefixLen = "30"
	serviceCIDR   = "10.0.0.0/24"
	kubernetesSvc = "10.0.0.1" // the first address of serviceCIDR
	podCIDR       = "10.244.0.0/24"
	nodeName      = "cmsync-node"
	// cgroupRoot is where the kubelet puts every Pod's cgroup, in each hierarchy, so
	// that cleaning up is removing one subtree.
	cgroupRoot = "/cmsync-node"
	// SandboxImage is the name the node's pause image must carry.
	SandboxImage = "localhost/cmsync-node/pause:1"
)

func (n *Node) path(parts ...string) string {
	return filepath.Join(append([]string{n.o.Dir}, parts...)...)
}

func (n *Node) containerdSocket() string { return n.path("containerd", "containerd.sock") }

// containerdConfig is containerd 2's configuration (version 3): every path under the
// node's directory, CNI from the plugins' directory, the local pause image, and
// restrict_oom_score_adj because root here lacks CAP_SYS_RESOURCE to lower the score.
func (n *Node) containerdConfig() string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q

[plugins.'io.containerd.server.v1.grpc']
  address = %[3]q
[plugins.'io.containerd.server.v1.ttrpc']
  address = %[4]q
[plugins.'io.containerd.nri.v1.nri']
  disable = true
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = %[5]q
[plugins.'io.containerd.cri.v1.images'.registry]
  config_path = %[10]q
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = []
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = %[6]q
  Root = %[7]q
  SystemdCgroup = false
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = [%[8]q]
  conf_dir = %[9]q
`, n.path("containerd", "root"), n.path("containerd", "state"), n.containerdSocket(), n.containerdSocket()+".ttrpc",
		SandboxImage, n.o.Runc, n.path("containerd", "runc"), n.o.CNIBin, n.path("cni", "net.d"), n.path("containerd", "certs.d"))
}

// cniConfig is a bridge network for the node's Pods.
func (n *Node) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "cmsync-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cmsync0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, podCIDR, n.path("cni", "ipam"))
}

// kubeletConfig runs the kubelet on this VM's cgroup v1 hierarchy (failCgroupV1: false,
// cgroupfs), with client-certificate and webhook authorization for the API server's
// calls, and eviction thresholds that a busy build disk does not trip.
func (n *Node) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]s
containerRuntimeEndpoint: unix://%[2]s
address: %[3]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[4]s
authorization:
  mode: Webhook
failSwapOn: false
podLogsDir: %[5]s
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
clusterDomain: cluster.local
serializeImagePulls: false
`, cgroupRoot, n.containerdSocket(), nodeIP, n.pki.path("ca.crt"), n.path("pod-logs"))
}
