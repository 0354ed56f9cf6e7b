//go:build e2e

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmsync/cmsync/test/harness"
)

// The chart's metrics.certSecret, set as for a cert-manager Certificate's Secret: the
// Deployment mounts the Secret where its --metrics-cert-dir points, and the
// ServiceMonitor checks the certificate with the Secret's ca.crt for the metrics
// Service's name. cmsync, given a directory holding such a Secret's files, serves that
// certificate, and a client that checks it as the ServiceMonitor does accepts it.
func TestMetricsCertificateFromASecret(t *testing.T) {
	const secret = "cmsync-metrics-tls"
	deployment, tlsConfig := renderMetricsCertChart(t, secret)
	dir := mountedCertDir(t, deployment, secret)
	if tlsConfig.CA.Secret.Name != secret || tlsConfig.CA.Secret.Key != "ca.crt" || tlsConfig.InsecureSkipVerify {
		t.Fatalf("the ServiceMonitor's tlsConfig %+v does not check the certificate with %s's ca.crt", tlsConfig, secret)
	}
	wantName := "cmsync-metrics." + harness.ReleaseNamespace + ".svc"
	if tlsConfig.ServerName != wantName {
		t.Errorf("the ServiceMonitor checks the name %q, want the metrics Service's %q", tlsConfig.ServerName, wantName)
	}

	certDir := t.TempDir() // what the kubelet mounts at dir: the Secret's keys as files
	roots := writeCertificateSecret(t, certDir, tlsConfig.ServerName)
	c := harness.StartController(t, "--metrics-secure=true", "--metrics-cert-dir="+certDir)
	c.Local(t)
	eventually(t, 30*time.Second, "the metrics endpoint serves the Secret's certificate", func() error {
		conn, err := tls.Dial("tcp", c.MetricsAddr, &tls.Config{RootCAs: roots, ServerName: tlsConfig.ServerName, MinVersion: tls.VersionTLS12})
		if err != nil {
			return err
		}
		return conn.Close()
	})
	t.Logf("the chart mounts %s at %s; cmsync served its certificate for %s", secret, dir, tlsConfig.ServerName)
}

// serviceMonitorTLS is the tlsConfig of a ServiceMonitor's endpoint, as far as read here.
type serviceMonitorTLS struct {
	InsecureSkipVerify bool   `json:"insecureSkipVerify"`
	ServerName         string `json:"serverName"`
	CA                 struct {
		Secret struct{ Name, Key string } `json:"secret"`
	} `json:"ca"`
}

// renderMetricsCertChart renders the chart with metrics.certSecret and the ServiceMonitor
// on, and returns its Deployment and the ServiceMonitor's tlsConfig.
func renderMetricsCertChart(t *testing.T, secret string) (*appsv1.Deployment, serviceMonitorTLS) {
	t.Helper()
	out, err := harness.Helm("template", harness.Release, "../../deploy/chart/cmsync", "--namespace", harness.ReleaseNamespace,
		"--set", "metrics.certSecret="+secret, "--set", "metrics.serviceMonitor.enabled=true",
		"--set", "metrics.serviceMonitor.insecureSkipVerify=false")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	var deployment *appsv1.Deployment
	var tlsConfig *serviceMonitorTLS
	for _, doc := range strings.Split(out, "\n---") {
		var kind struct{ Kind string }
		must(t, yaml.Unmarshal([]byte(doc), &kind))
		switch kind.Kind {
		case "Deployment":
			deployment = &appsv1.Deployment{}
			must(t, yaml.Unmarshal([]byte(doc), deployment))
		case "ServiceMonitor":
			var sm struct {
				Spec struct {
					Endpoints []struct {
						TLSConfig serviceMonitorTLS `json:"tlsConfig"`
					} `json:"endpoints"`
				} `json:"spec"`
			}
			must(t, yaml.Unmarshal([]byte(doc), &sm))
			if len(sm.Spec.Endpoints) == 1 {
				tlsConfig = &sm.Spec.Endpoints[0].TLSConfig
			}
		}
	}
	if deployment == nil || tlsConfig == nil {
		t.Fatalf("no Deployment or no ServiceMonitor endpoint in the rendered chart:\n%s", out)
	}
	return deployment, *tlsConfig
}

// mountedCertDir returns the directory the Deployment passes to --metrics-cert-dir, and
// checks that the Secret is mounted there, read-only and whole (not a subPath, which the
// kubelet would never update).
func mountedCertDir(t *testing.T, deployment *appsv1.Deployment, secret string) string {
	t.Helper()
	pod := deployment.Spec.Template.Spec
	var dir string
	for _, arg := range pod.Containers[0].Args {
		if d, ok := strings.CutPrefix(arg, "--metrics-cert-dir="); ok {
			dir = d
		}
	}
	volumes := map[string]string{}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			volumes[v.Name] = v.Secret.SecretName
		}
	}
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.MountPath == dir && volumes[m.Name] == secret && m.ReadOnly && m.SubPath == "" {
			return dir
		}
	}
	t.Fatalf("--metrics-cert-dir=%q, but Secret %s is not mounted there whole and read-only: mounts %+v, volumes %v",
		dir, secret, pod.Containers[0].VolumeMounts, volumes)
	return ""
}

// writeCertificateSecret writes into dir what a cert-manager Certificate's Secret holds —
// ca.crt, and tls.crt and tls.key for the DNS name — and returns a pool of its CA.
func writeCertificateSecret(t *testing.T, dir, dnsName string) *x509.CertPool {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	caTemplate := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "metrics CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	must(t, err)
	ca, err := x509.ParseCertificate(caDER)
	must(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	must(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	for name, block := range map[string]*pem.Block{
		"ca.crt":  {Type: "CERTIFICATE", Bytes: caDER},
		"tls.crt": {Type: "CERTIFICATE", Bytes: leafDER},
		"tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		must(t, os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600))
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return roots
}
