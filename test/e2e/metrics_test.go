//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// With --metrics-secure, as the chart runs cmsync, /metrics is served over HTTPS only to
// a client the API server authenticates and authorizes: an anonymous scrape is refused
// (401), a ServiceAccount without the chart's metrics-reader role is forbidden (403),
// and one bound to it is served. The TokenReviews and SubjectAccessReviews this takes
// are what the chart's metrics-auth ClusterRole grants (the least-privilege audit
// checks both are used).
func TestSecureMetrics(t *testing.T) {
	c := harness.StartController(t, "--metrics-secure=true")
	c.Local(t)
	ns := harness.NewNamespace(t, "scrape", nil)
	scraper, stranger := serviceAccountToken(t, ns, "prometheus"), serviceAccountToken(t, ns, "stranger")
	bindMetricsReader(t, ns, "prometheus")

	// The metrics endpoint starts listening just after /healthz does.
	eventually(t, 30*time.Second, "anonymous scrape refused", func() error {
		code, _, err := scrape(c.MetricsAddr, "")
		if err != nil || code != http.StatusUnauthorized {
			return fmt.Errorf("anonymous scrape: %d (%v), want 401", code, err)
		}
		return nil
	})
	if code, _, err := scrape(c.MetricsAddr, "not-a-token-the-api-server-issued"); err != nil || code != http.StatusUnauthorized {
		t.Errorf("scrape with a token the API server does not know: %d (%v), want 401", code, err)
	}
	if code, _, err := scrape(c.MetricsAddr, stranger); err != nil || code != http.StatusForbidden {
		t.Errorf("scrape by a ServiceAccount without metrics-reader: %d, want 403", code)
	}
	eventually(t, 30*time.Second, "an authorized scrape is served", func() error {
		code, body, err := scrape(c.MetricsAddr, scraper)
		if err != nil || code != http.StatusOK || !strings.Contains(body, "cmsync_sources{") {
			return fmt.Errorf("scrape: %d, %d bytes (%v)", code, len(body), err)
		}
		return nil
	})
	if code, _, err := scrape(c.MetricsAddr, ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("anonymous scrape after an authorized one: %d (%v), want 401", code, err)
	}
}

// scrape GETs https://addr/metrics with token (none when empty); cmsync's certificate
// is self-signed, as the chart's ServiceMonitor assumes by default.
func scrape(addr, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed
	resp, err := insecure.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// bindMetricsReader binds the ServiceAccount namespace/name to the chart's
// metrics-reader ClusterRole until the test ends.
func bindMetricsReader(t *testing.T, namespace, name string) {
	t.Helper()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "read-cmsync-metrics-" + namespace + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cmsync-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: namespace, Name: name}},
	}
	must(t, harness.K8s.Create(context.Background(), binding))
	t.Cleanup(func() { _ = harness.K8s.Delete(context.Background(), binding) })
}

// serviceAccountToken creates a ServiceAccount and returns a token of it.
func serviceAccountToken(t *testing.T, namespace, name string) string {
	t.Helper()
	ctx := context.Background()
	must(t, harness.K8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}))
	tr, err := harness.Clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	must(t, err)
	return tr.Status.Token
}
