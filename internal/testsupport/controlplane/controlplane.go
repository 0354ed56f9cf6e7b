// Package controlplane runs a real kube-apiserver and etcd for cmsync's tests and for
// `make run` on a machine without a cluster. The binaries are built from source by
// hack/control-plane-binaries.sh; KUBEBUILDER_ASSETS names their directory.
package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Env is a running control plane.
type Env struct {
	env *envtest.Environment
	// Config authenticates as a cluster administrator.
	Config *rest.Config
	// KubeConfig is Config as a kubeconfig file's content.
	KubeConfig []byte
}

// Start starts kube-apiserver and etcd, and installs the CRDs found in crdDirs.
func Start(crdDirs ...string) (*Env, error) {
	return StartWith(Options{CRDDirs: crdDirs})
}

// Options change how the control plane starts.
type Options struct {
	// CRDDirs hold CRDs to install.
	CRDDirs []string
	// AuditLog, when set, is where kube-apiserver writes one JSON line per write
	// request (create, update, patch, delete), with its user agent.
	AuditLog string
	// AuditAllFrom lists users whose every request, reads included, is audited too
	// (the e2e suite proves from it that cmsync's RBAC grants nothing unused).
	AuditAllFrom []string
	// EtcdQuotaBytes, when set, replaces etcd's backend quota (2 GiB by default), and
	// the API server compacts etcd every minute instead of every five: the bench writes
	// gigabytes of large objects, and old revisions count against the quota until
	// compacted.
	EtcdQuotaBytes int64
}

// auditPolicy records write requests at Metadata level, every request of the users
// listed, and nothing else.
func auditPolicy(allFrom []string) string {
	users := ""
	if len(allFrom) > 0 {
		quoted, _ := json.Marshal(allFrom) // a JSON list is a YAML flow sequence
		users = "- level: Metadata\n  users: " + string(quoted) + "\n"
	}
	return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
` + users + `- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`
}

// StartWith starts kube-apiserver and etcd as o says.
func StartWith(o Options) (*Env, error) {
	crdDirs := o.CRDDirs
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds kube-apiserver and etcd and sets it")
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("KUBEBUILDER_ASSETS=%s has no %s: %w", assets, bin, err)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: len(crdDirs) > 0,
	}
	if o.AuditLog != "" {
		policy := o.AuditLog + ".policy.yaml"
		if err := os.WriteFile(policy, []byte(auditPolicy(o.AuditAllFrom)), 0o600); err != nil {
			return nil, err
		}
		env.ControlPlane.GetAPIServer().Configure().
			Set("audit-log-path", o.AuditLog).
			Set("audit-policy-file", policy).
			Set("audit-log-mode", "blocking").
			// Never rotate: readers follow one file (the bench's 100,000 writes fill the
			// default 100 MB).
			Set("audit-log-maxsize", "1000000")
	}
	if o.EtcdQuotaBytes > 0 {
		if env.ControlPlane.Etcd == nil {
			env.ControlPlane.Etcd = &envtest.Etcd{}
		}
		env.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", strconv.FormatInt(o.EtcdQuotaBytes, 10))
		env.ControlPlane.GetAPIServer().Configure().Set("etcd-compaction-interval", "1m")
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	return &Env{env: env, Config: cfg, KubeConfig: env.KubeConfig}, nil
}

// AddUser provisions a user of the given name and groups (a client certificate) and
// returns a kubeconfig that authenticates as it. It holds no permission until bound.
func (e *Env) AddUser(name string, groups ...string) ([]byte, *rest.Config, error) {
	user, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, e.Config)
	if err != nil {
		return nil, nil, fmt.Errorf("adding user %s: %w", name, err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("writing the kubeconfig of %s: %w", name, err)
	}
	return kubeconfig, user.Config(), nil
}

// Stop stops the control plane and removes its data.
func (e *Env) Stop() error { return e.env.Stop() }
