//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// The chart's dashboard and alerts, proven against a real Prometheus: it scrapes cmsync
// as the chart's ServiceMonitor does (HTTPS, a ServiceAccount token bound to the
// metrics-reader role) while sources fan out, conflict and turn Invalid; then every
// panel's query returns data, and every alert rule is loaded and evaluated without
// error.
func TestDashboardAndAlertsOnPrometheus(t *testing.T) {
	c := harness.StartController(t, "--metrics-secure=true", "--leader-elect=true")
	c.Local(t)
	prometheus := os.Getenv("PROMETHEUS")
	if prometheus == "" {
		t.Fatal("PROMETHEUS is not set: run make e2e")
	}
	ctx := context.Background()
	dir := t.TempDir()
	ns := harness.NewNamespace(t, "prom", nil)
	token := serviceAccountToken(t, ns, "prometheus")
	bindMetricsReader(t, ns, "prometheus")
	must(t, os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600))
	alerts, err := filepath.Abs("../../deploy/chart/cmsync/files/alerts.yaml")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: cmsync
    scheme: https
    authorization: {credentials_file: %q}
    tls_config: {insecure_skip_verify: true}
    static_configs: [{targets: [%q]}]
`, alerts, filepath.Join(dir, "token"), c.MetricsAddr)), 0o600))
	api := "http://" + harness.FreeAddr(t)
	startPrometheus(t, prometheus, dir, strings.TrimPrefix(api, "http://"))

	// A little of everything: a fan-out, a conflict, an Invalid source.
	src, a, b := harness.NewNamespace(t, "prom-src", nil), harness.NewNamespace(t, "prom-dst", nil), harness.NewNamespace(t, "prom-dst", nil)
	harness.DeleteSourcesAtEnd(t, []string{src})
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "taken"}}))
	for name, annotations := range map[string]map[string]string{
		"fan":     {v1alpha1.TargetNamespacesAnnotation: a + "," + b},
		"taken":   {v1alpha1.TargetNamespacesAnnotation: b},
		"invalid": {v1alpha1.TargetNamespacesAnnotation: a, v1alpha1.KeysAnnotation: "a/b"},
	} {
		must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: name,
			Labels: map[string]string{v1alpha1.ReplicateLabel: "true"}, Annotations: annotations}, Data: map[string]string{"k": "v"}}))
	}
	harness.WaitForAnnotation(t, src, "fan", v1alpha1.SyncedAnnotation, "2/2")
	harness.WaitForAnnotation(t, src, "invalid", v1alpha1.StatusAnnotation, v1alpha1.StatusInvalid)

	eventually(t, 60*time.Second, "Prometheus scrapes cmsync", func() error {
		return expectData(api, `cmsync_sources_not_synced{job="cmsync",reason="Invalid"} > 0`)
	})
	time.Sleep(5 * time.Second) // a few more samples, so that rates have two points

	var dashboard struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	raw, err := os.ReadFile("../../deploy/chart/cmsync/files/dashboard.json")
	must(t, err)
	must(t, json.Unmarshal(raw, &dashboard))
	queries := 0
	for _, panel := range dashboard.Panels {
		for _, target := range panel.Targets {
			queries++
			expr := strings.NewReplacer("$job", ".+", "$__rate_interval", "1m").Replace(target.Expr)
			if err := expectData(api, expr); err != nil {
				t.Errorf("panel %q: %v", panel.Title, err)
			}
		}
	}
	if queries < 10 {
		t.Errorf("only %d dashboard queries found", queries)
	}
	checkAlertRules(t, api)
}

// startPrometheus runs prometheus with the config in dir, until the test ends.
func startPrometheus(t *testing.T, bin, dir, addr string) {
	t.Helper()
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	must(t, err)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = log, log
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		_ = log.Close()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", harness.Tail(log.Name(), 30))
		}
	})
	eventually(t, 60*time.Second, "Prometheus ready", func() error {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("ready: %d", resp.StatusCode)
		}
		return nil
	})
}

// expectData evaluates expr now and fails unless it returns at least one sample.
func expectData(api, expr string) error {
	var answer struct {
		Status string
		Error  string
		Data   struct{ Result []json.RawMessage }
	}
	if err := getJSON(api+"/api/v1/query?query="+url.QueryEscape(expr), &answer); err != nil {
		return err
	}
	if answer.Status != "success" {
		return fmt.Errorf("%s: %s", expr, answer.Error)
	}
	if len(answer.Data.Result) == 0 {
		return fmt.Errorf("%s: no data", expr)
	}
	return nil
}

// checkAlertRules: every alert of the chart is loaded and evaluated without error.
func checkAlertRules(t *testing.T, api string) {
	t.Helper()
	eventually(t, 30*time.Second, "alert rules evaluated", func() error {
		var answer struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name, Health, LastError string
						LastEvaluation          time.Time
					}
				}
			}
		}
		if err := getJSON(api+"/api/v1/rules?type=alert", &answer); err != nil {
			return err
		}
		n := 0
		for _, g := range answer.Data.Groups {
			for _, r := range g.Rules {
				n++
				if r.Health != "ok" || r.LastEvaluation.IsZero() {
					return fmt.Errorf("rule %s: health %q %s", r.Name, r.Health, r.LastError)
				}
			}
		}
		if n != 7 {
			return fmt.Errorf("%d alert rules loaded, want 7", n)
		}
		return nil
	})
}

func getJSON(u string, into any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}
