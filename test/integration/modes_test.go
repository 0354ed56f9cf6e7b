package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
	"github.com/cmsync/cmsync/replicator"
)

func setupError(t *testing.T, env *controlplane.Env, mode string) error {
	t.Helper()
	_, _, err := setupWith(t, env, func(o *replicator.Options) { o.ConfigMapSync = mode })
	return err
}

// --configmapsync: auto runs without the CRD, enabled refuses to start without it with
// an error saying what to do, anything else is refused.
func TestConfigMapSyncModes(t *testing.T) {
	bare, err := controlplane.Start() // no CRDs installed
	must(t, err)
	defer func() { _ = bare.Stop() }()

	if err := setupError(t, bare, replicator.SyncAuto); err != nil {
		t.Errorf("auto without the CRD: %v", err)
	}
	if err := setupError(t, bare, replicator.SyncDisabled); err != nil {
		t.Errorf("disabled: %v", err)
	}
	if err := setupError(t, bare, replicator.SyncEnabled); err == nil || !strings.Contains(err.Error(), "apply the release's CRD file") {
		t.Errorf("enabled without the CRD: %v", err)
	}
	if err := setupError(t, bare, "maybe"); err == nil || !strings.Contains(err.Error(), "must be auto, enabled or disabled") {
		t.Errorf("bad mode: %v", err)
	}

	// With the CRD installed, disabled leaves ConfigMapSyncs alone.
	startController(t, func(o *replicator.Options) { o.ConfigMapSync = replicator.SyncDisabled })
	sync := newSync(
		t,
		v1alpha1.ConfigMapSyncSpec{SourceNamespace: "default", ConfigMapName: "x", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: "kube-public"}},
	)
	consistently(t, 2*time.Second, "disabled controller does not touch ConfigMapSyncs", func() error {
		got := &v1alpha1.ConfigMapSync{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sync), got); err != nil {
			return err
		}
		if len(got.Finalizers) != 0 || len(got.Status.Conditions) != 0 {
			return errorf("reconciled: %+v", got.ObjectMeta)
		}
		return nil
	})
	must(t, k8s.Delete(context.Background(), sync))
}

// setupWith sets cmsync up against env with the options as change leaves them, and
// returns the manager (not started) and what Setup served, or the setup's error.
func setupWith(t *testing.T, env *controlplane.Env, change func(*replicator.Options)) (ctrl.Manager, replicator.Served, error) {
	t.Helper()
	o := replicator.Options{Policy: defaultPolicy(), Writers: 1, ConflictRecheck: time.Second, Registerer: prometheus.NewRegistry()}
	change(&o)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 newScheme(),
		Cache:                  replicator.ManagerCacheOptions(o),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr(true)},
	})
	if err != nil {
		return nil, replicator.Served{}, err
	}
	served, err := replicator.Setup(context.Background(), mgr, o)
	return mgr, served, err
}

// --secretsync: enabled refuses to start without the CRD or without Secrets, saying
// what to do; auto runs without the CRD (and starts again once it is installed:
// TestStartAgainReasons).
func TestSecretSyncModes(t *testing.T) {
	bare, err := controlplane.Start() // no CRDs installed
	must(t, err)
	defer func() { _ = bare.Stop() }()

	for _, tc := range []struct {
		secrets bool
		mode    string
		want    string
	}{
		{true, replicator.SyncEnabled, "apply the release's CRD file"},
		{false, replicator.SyncEnabled, "it needs --secrets=enabled"},
		{true, "sometimes", "must be auto, enabled or disabled"},
	} {
		_, _, err := setupWith(t, bare, func(o *replicator.Options) { o.Secrets, o.SecretSync = tc.secrets, tc.mode })
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--secretsync") {
			t.Errorf("secrets %v, --secretsync=%s: %v, want an error saying %q", tc.secrets, tc.mode, err, tc.want)
		}
	}

	if _, _, err := setupWith(t, bare, func(o *replicator.Options) {
		o.Secrets, o.SecretSync, o.ConfigMapSync = true, replicator.SyncAuto, replicator.SyncDisabled
	}); err != nil {
		t.Errorf("secrets, --secretsync=auto without the CRD: %v", err)
	}
}

// With Secrets disabled, SecretSyncs are left alone (no finalizer, no status, no
// request about Secrets); the end-to-end suite reads the log line that says why.
func TestSecretSyncIsInertWithoutSecrets(t *testing.T) {
	running := startController(t)
	srcNS, dst := newNamespace(t, "ssync-src", nil), newNamespace(t, "ssync-dst", nil)
	sync := &v1alpha1.SecretSync{ObjectMeta: metav1.ObjectMeta{Name: "inert-" + randomSuffix()},
		Spec: v1alpha1.SecretSyncSpec{SourceNamespace: srcNS, SecretName: "x", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}}}
	must(t, k8s.Create(context.Background(), sync))
	consistently(t, 2*time.Second, "SecretSync untouched", func() error {
		got := &v1alpha1.SecretSync{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sync), got); err != nil {
			return err
		}
		if len(got.Finalizers) != 0 || len(got.Status.Conditions) != 0 {
			return errorf("reconciled: %+v", got.ObjectMeta)
		}
		return nil
	})
	if n := running.secretRequests.Load(); n != 0 {
		t.Errorf("%d requests about Secrets with --secrets=disabled", n)
	}
	must(t, k8s.Delete(context.Background(), sync))
}
