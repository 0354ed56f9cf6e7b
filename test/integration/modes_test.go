package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	o := replicator.Options{
		Policy: defaultPolicy(), Writers: 1, ConflictRecheck: time.Second,
		Registerer: prometheus.NewRegistry(), ConfigMapSync: mode,
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 newScheme(),
		Cache:                  replicator.ManagerCacheOptions(o),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr(true)},
	})
	must(t, err)
	return replicator.Setup(context.Background(), mgr, o)
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
	if err := setupError(t, bare, replicator.SyncEnabled); err == nil || !strings.Contains(err.Error(), "install the CRD") {
		t.Errorf("enabled without the CRD: %v", err)
	}
	if err := setupError(t, bare, "maybe"); err == nil || !strings.Contains(err.Error(), "must be auto, enabled or disabled") {
		t.Errorf("bad mode: %v", err)
	}

	// With the CRD installed, disabled leaves ConfigMapSyncs alone.
	startController(t, func(o *replicator.Options) { o.ConfigMapSync = replicator.SyncDisabled })
	sync := newSync(t, v1alpha1.ConfigMapSyncSpec{SourceNamespace: "default", ConfigMapName: "x", DestinationNamespace: "kube-public"})
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
