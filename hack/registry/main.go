// Command registry serves the kind suite's image and chart registry (make kind-e2e): the
// CNCF distribution registry on -addr, over TLS from a CA of its own and with htpasswd
// authentication, as a user's private registry would be. It writes into -dir:
//
//	registry.env                   REGISTRY_HOST, REGISTRY_USER, REGISTRY_PASSWORD and
//	                               REGISTRY_CA, for whoever pushes (ko, helm, cosign)
//	certs.d/ADDR/hosts.toml        containerd's hosts configuration: pull from ADDR over
//	                               TLS that trusts the CA (the kind nodes mount -dir at
//	                               the same path)
//	ready                          once the registry answers
//
// It runs until SIGINT or SIGTERM, then stops the registry.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"
)

const user = "cmsync"

func main() {
	dir := flag.String("dir", "", "directory for the registry's files and data")
	addr := flag.String("addr", "", "IP:port to listen on (its IP goes into the serving certificate)")
	bin := flag.String("bin", "", "the CNCF distribution registry binary (hack/tool.sh registry)")
	flag.Parse()
	if *dir == "" || *addr == "" || *bin == "" {
		fmt.Fprintln(os.Stderr, "registry: -dir, -addr and -bin are required")
		os.Exit(2)
	}
	if err := serve(*dir, *addr, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func serve(dir, addr, bin string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := writeFiles(dir, addr); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(bin, "serve", filepath.Join(dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	if err := waitReady(ctx, dir, addr); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ready"), []byte("ready\n"), 0o644); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// writeFiles writes the CA, the serving certificate, htpasswd, the registry's
// configuration, registry.env and containerd's hosts.toml.
func writeFiles(dir, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	ca, serving, err := certificates(net.ParseIP(host))
	if err != nil {
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
	path := func(name string) string { return filepath.Join(dir, name) }
	files := map[string]string{
		"ca.crt":   ca,
		"tls.pem":  serving,
		"htpasswd": user + ":" + string(hash) + "\n",
		"config.yml": fmt.Sprintf(`version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: %q}, delete: {enabled: true}}
http: {addr: %q, tls: {certificate: %q, key: %q}}
auth: {htpasswd: {realm: cmsync-kind, path: %q}}
`, path("data"), addr, path("tls.pem"), path("tls.pem"), path("htpasswd")),
		"registry.env": fmt.Sprintf("REGISTRY_HOST=%s\nREGISTRY_USER=%s\nREGISTRY_PASSWORD=%s\nREGISTRY_CA=%s\n",
			addr, user, password, path("ca.crt")),
		"certs.d/" + addr + "/hosts.toml": fmt.Sprintf(`server = "https://%s"
[host."https://%s"]
  capabilities = ["pull", "resolve"]
  ca = %q
`, addr, addr, path("ca.crt")),
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(path(name)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path(name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	// The key is in tls.pem: readable by root only.
	return os.Chmod(path("tls.pem"), 0o600)
}

// certificates returns a new CA's certificate and a serving certificate for ip with its
// key, both PEM.
func certificates(ip net.IP) (caPEM, servingPEM string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cmsync-kind-registry-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "registry"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{ip},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	caPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	servingPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) +
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return caPEM, servingPEM, nil
}

// waitReady waits until the registry answers an anonymous client with 401.
func waitReady(ctx context.Context, dir, addr string) error {
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Get("https://" + addr + "/v2/")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
			err = fmt.Errorf("GET /v2/: %s", resp.Status)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.Join(errors.New("the registry did not come up (see registry.log)"), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
