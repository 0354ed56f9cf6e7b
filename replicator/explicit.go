package replicator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/replicator/replicastore"
)

// Values of Options.ConfigMapSync and Options.SecretSync.
const (
	SyncAuto     = "auto"
	SyncEnabled  = "enabled"
	SyncDisabled = "disabled"
)

// checkSyncModes refuses a mode that is none of the three, and SecretSync forced on
// without Secrets.
func checkSyncModes(o Options) error {
	for _, flag := range []struct{ name, mode string }{{"configmapsync", o.ConfigMapSync}, {"secretsync", o.SecretSync}} {
		switch flag.mode {
		case SyncAuto, SyncEnabled, SyncDisabled:
		default:
			return fmt.Errorf("--%s=%q: must be auto, enabled or disabled", flag.name, flag.mode)
		}
	}
	if o.SecretSync == SyncEnabled && !o.Secrets {
		return errors.New("--secretsync=enabled: SecretSync replicates Secrets, it needs --secrets=enabled")
	}
	return nil
}

// setupSync adds, as mode says, the controller of the explicit kind that names sources
// of the door's kind (ConfigMapSync, SecretSync). A kind "auto" runs without because
// its CRD is missing is added to withoutCRD.
func setupSync[T desired.Object](
	ctx context.Context, mgr ctrl.Manager, o Options, mode string, shared door[T], replicas *replicastore.Store[T], withoutCRD []schema.GroupVersionKind,
) ([]schema.GroupVersionKind, error) {
	kind := shared.engine.kind.NewSync().SyncSpec().Kind
	run, err := servesCRD(mgr.GetRESTMapper(), kind, mode)
	switch {
	case err != nil:
		return withoutCRD, fmt.Errorf("--%s=%s: %w", strings.ToLower(kind), mode, err)
	case !run && mode == SyncAuto:
		log.FromContext(ctx).Info("the " + kind + " controller waits for its CRD: cmsync starts it once the API server serves " + kind)
		return append(withoutCRD, v1alpha1.GroupVersion.WithKind(kind)), nil
	case !run:
		log.FromContext(ctx).Info("the "+kind+" controller is off", strings.ToLower(kind), mode)
		return withoutCRD, nil
	}
	watching, err := client.NewWithWatch(mgr.GetConfig(), client.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
	})
	if err != nil {
		return withoutCRD, fmt.Errorf("creating a client for the %s sources: %w", kind, err)
	}
	syncs := &syncForm[T]{client: mgr.GetClient(), sources: newSourceWatcher(ctx, shared.engine.kind, watching),
		ownStatus: newOwnStatus(desired.SameSyncOutcome), door: shared}
	if err := syncs.SetupWithManager(mgr, replicas, o.Controller); err != nil {
		return withoutCRD, fmt.Errorf("setting up the %s controller: %w", kind, err)
	}
	return withoutCRD, nil
}

// servesCRD decides from the mode and whether the API server serves the CRD of the
// explicit kind.
func servesCRD(mapper meta.RESTMapper, kind, mode string) (bool, error) {
	if mode == SyncDisabled {
		return false, nil
	}
	gk := schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: kind}
	_, err := mapper.RESTMapping(gk, v1alpha1.GroupVersion.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err) && mode == SyncAuto:
		return false, nil
	case meta.IsNoMatchError(err):
		return false, fmt.Errorf(
			"the API server does not serve %s.%s/%s: apply the release's CRD file (cmsync-crds.yaml; docs/upgrade.md), or deploy/crds from a checkout",
			kind,
			gk.Group,
			v1alpha1.GroupVersion.Version,
		)
	default:
		return false, fmt.Errorf("looking up the %s CRD: %w", kind, err)
	}
}
