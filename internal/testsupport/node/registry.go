package node

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// RegistryHost is where the node's image registry listens, inside the node's network
// and reachable from the host.
const RegistryHost = nodeIP + ":5000"

// registryUser is the htpasswd user of the node's registry.
const registryUser = "cmsync"

// startRegistry runs the CNCF distribution registry (Options.RegistryBin) on
// RegistryHost with a certificate from the node's CA and htpasswd authentication, and
// writes Dir/registry.env (REGISTRY_HOST, REGISTRY_USER, REGISTRY_PASSWORD, REGISTRY_CA)
// for whoever pushes to it. containerd trusts it through its hosts configuration.
func (n *Node) startRegistry(ctx context.Context) error {
	if n.o.RegistryBin == "" {
		return nil
	}
	if err := n.pki.issue("registry", pkix.Name{CommonName: "registry"}, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP(nodeIP)}, nil); err != nil {
		return err
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	password := hex.EncodeToString(secret)
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	files := map[string]string{
		"registry/htpasswd": registryUser + ":" + string(hash) + "\n",
		"registry/config.yml": fmt.Sprintf(`version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: %q}, delete: {enabled: true}}
http: {addr: %q, tls: {certificate: %q, key: %q}}
auth: {htpasswd: {realm: cmsync-node, path: %q}}
`, n.path("registry", "data"), RegistryHost, n.pki.path("registry.crt"), n.pki.path("registry.key"), n.path("registry", "htpasswd")),
		"registry.env": fmt.Sprintf("REGISTRY_HOST=%s\nREGISTRY_USER=%s\nREGISTRY_PASSWORD=%s\nREGISTRY_CA=%s\n",
			RegistryHost, registryUser, password, n.pki.path("ca.crt")),
		// containerd's hosts configuration: pull from the registry over TLS it trusts.
		"containerd/certs.d/" + RegistryHost + "/hosts.toml": fmt.Sprintf(`server = "https://%s"
[host."https://%s"]
  capabilities = ["pull", "resolve"]
  ca = %q
`, RegistryHost, RegistryHost, n.pki.path("ca.crt")),
	}
	for name, content := range files {
		if err := os.MkdirAll(n.path(name, ".."), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(n.path(name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	if err := n.start("registry", n.o.RegistryBin, nil, "serve", n.path("registry", "config.yml")); err != nil {
		return err
	}
	return n.waitRegistry(ctx)
}

// waitRegistry waits until the registry answers an anonymous client with 401.
func (n *Node) waitRegistry(ctx context.Context) error {
	ca, err := os.ReadFile(n.pki.path("ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Get("https://" + RegistryHost + "/v2/")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
			err = fmt.Errorf("GET /v2/: %s", resp.Status)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the registry did not come up: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
