package replicator

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/predicates"
	"github.com/cmsync/cmsync/replicator/replicastore"
)

// Options configure the controllers.
type Options struct {
	Policy desired.Policy
	// Writers bounds the parallel writes of one pass over a source.
	Writers int
	// ConflictRecheck is how soon an owner with a conflict looks again.
	ConflictRecheck time.Duration
	// Controller sets parallelism and the retry rate limiter.
	Controller controller.Options
	// Registerer receives cmsync's metrics.
	Registerer prometheus.Registerer
	// ConfigMapSync runs the ConfigMapSync controller: "auto" when its CRD is
	// installed, "enabled" (an error without the CRD) or "disabled".
	ConfigMapSync string
	// Secrets replicates labelled Secrets too. Off, cmsync makes no request about
	// Secrets at all.
	Secrets bool
	// SecretSync runs the SecretSync controller, as ConfigMapSync says for its own,
	// when Secrets is on. Empty, either is "auto".
	SecretSync string
	// ObjectKinds are the kinds an ObjectSync may copy (--object-kinds). Empty: the
	// ObjectSync controller does not run, and cmsync makes no request about them.
	ObjectKinds []schema.GroupVersionKind
}

// Served is what Setup set up, as the process running mgr needs to know it.
type Served struct {
	// WithoutCRD are the explicit kinds "auto" left off because the API server does not
	// serve their CRD: their controllers run from cmsync's next start.
	WithoutCRD []schema.GroupVersionKind
	// CachesSynced waits until every cache the controllers read has listed, whether or
	// not this process leads; false when ctx ends first.
	CachesSynced func(context.Context) bool
}

// The names of the source controllers. A controller's name is the controller label of
// controller-runtime's reconcile metrics and the name label of its workqueue metrics,
// which the chart's alerts and dashboard select (ControllerNames).
const (
	configMapSourceController = "source"
	secretSourceController    = "secret-source"
)

// ControllerNames returns the name of every controller Setup can add: the source
// controllers, the controllers of the explicit kinds (syncControllerName) and the
// ObjectSync controller.
func ControllerNames() []string {
	return []string{
		configMapSourceController, syncControllerName(desired.ConfigMapKind{}.NewSync()),
		secretSourceController, syncControllerName(desired.SecretKind{}.NewSync()),
		objectSyncController,
	}
}

// metadataAnswersFrom is the size of a replica (in protobuf) from which the replica
// store asks the API server to answer its creates and updates with the replica's
// metadata alone (metawrite). Such an answer costs the API server more than the whole
// object and saves the writer the decoding of the content, which only pays for large
// replicas: at 1 and 100 KiB the metadata-only answer cost the API server and etcd more
// CPU than it saved cmsync, at 900 KiB it halved the writer's CPU with no difference
// at the API server beyond the rounds' spread; the two cross between 100 and 900 KiB.
// Measured with make bench BENCH_CMD=styles BENCH_ARGS="-styles-size …" (bench/HISTORY.md).
const metadataAnswersFrom = 256 << 10

// Setup adds to mgr, for ConfigMaps and, with Options.Secrets, for Secrets: the
// replica store and the source controller; and, as Options.ConfigMapSync and
// Options.SecretSync say, the controller of the explicit kind (ConfigMapSync,
// SecretSync). mgr's cache must be built with ManagerCacheOptions(o) and its scheme
// must include v1alpha1.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) (Served, error) {
	o.ConfigMapSync, o.SecretSync = cmp.Or(o.ConfigMapSync, SyncAuto), cmp.Or(o.SecretSync, SyncAuto)
	if err := checkSyncModes(o); err != nil {
		return Served{}, err
	}
	kinds := []string{desired.ConfigMapKind{}.Name()}
	if o.Secrets {
		kinds = append(kinds, desired.SecretKind{}.Name())
	}
	metrics := newMetrics(o.Registerer, kinds...)
	configMaps, configMapReplicas, err := setupKind(ctx, mgr, o, desired.ConfigMapKind{}, configMapSourceController, metrics)
	if err != nil {
		return Served{}, err
	}
	var served Served
	if served.WithoutCRD, err = setupSync(ctx, mgr, o, o.ConfigMapSync, configMaps, configMapReplicas, served.WithoutCRD); err != nil {
		return Served{}, err
	}
	caches := []listed{mgr.GetCache(), configMapReplicas}
	if o.Secrets {
		secrets, secretReplicas, err := setupKind(ctx, mgr, o, desired.SecretKind{}, secretSourceController, metrics)
		if err != nil {
			return Served{}, err
		}
		if served.WithoutCRD, err = setupSync(ctx, mgr, o, o.SecretSync, secrets, secretReplicas, served.WithoutCRD); err != nil {
			return Served{}, err
		}
		caches = append(caches, secretReplicas)
	} else if o.SecretSync != SyncDisabled {
		log.FromContext(ctx).Info("the SecretSync controller is off: Secrets are disabled (--secrets=disabled); SecretSyncs are left as they are")
	}
	objectReplicas, err := setupObjectSync(ctx, mgr, o, metrics, &served)
	if err != nil {
		return Served{}, err
	}
	caches = append(caches, objectReplicas...)
	served.CachesSynced = allSynced(caches...)
	return served, nil
}

// setupKind adds the replica store and the source controller (named name) of kind to
// mgr, and returns the door their passes go through, which the controller of the
// explicit kind shares.
func setupKind[T desired.Object](ctx context.Context, mgr ctrl.Manager, o Options, kind desired.Kind[T], name string, metrics *sourceMetrics) (
	door[T], *replicastore.Store[T], error,
) {
	shared, replicas, err := newDoor(ctx, mgr, o, kind, metrics)
	if err != nil {
		return door[T]{}, nil, err
	}
	// The sources' informer, made before the cache starts: it then starts with the
	// cache, and in scoped mode its informers of every namespace list together. Made
	// by the controller's watch after the start, each would list in turn, the watch
	// waiting for one before it made the next (at 1,000 namespaces, 100 s).
	if _, err := mgr.GetCache().GetInformer(ctx, desired.NewMetadata(kind)); err != nil {
		return door[T]{}, nil, fmt.Errorf("creating the %s source informer: %w", kind.Name(), err)
	}
	former := newFormerSources(kind, mgr.GetAPIReader(), allSynced(replicas, mgr.GetCache()), o.Policy.Scope)
	if err := mgr.Add(former); err != nil {
		return door[T]{}, nil, fmt.Errorf("adding the %s former-source sweep: %w", kind.Name(), err)
	}
	sources := &sourceForm[T]{kind: kind, name: name, client: mgr.GetClient(), apiReader: mgr.GetAPIReader(),
		contents:  newSourceContents(kind, mgr.GetAPIReader(), defaultSourceContentBytes),
		ownStatus: newOwnStatus(func(a, b desired.SourceStatus) bool { return a == b }), door: shared}
	if err := sources.SetupWithManager(mgr, replicas, former.Events(), o.Controller); err != nil {
		return door[T]{}, nil, fmt.Errorf("setting up the %s source controller: %w", kind.Name(), err)
	}
	return shared, replicas, nil
}

// newDoor adds kind's replica store to mgr, and returns it with the door that writes
// through it: what every form of the kind shares.
func newDoor[T desired.Object](ctx context.Context, mgr ctrl.Manager, o Options, kind desired.Kind[T], metrics *sourceMetrics) (
	door[T], *replicastore.Store[T], error,
) {
	replicas, err := replicastore.New(ctx, replicastore.Config{
		REST: mgr.GetConfig(), HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), MetadataAnswersFrom: metadataAnswersFrom,
		Changed:    predicate.And(predicates.NotReserved(o.Policy), predicates.ReplicaChanged()),
		Namespaces: o.Policy.Scope,
	}, kind)
	if err != nil {
		return door[T]{}, nil, err
	}
	if err := mgr.Add(replicas); err != nil {
		return door[T]{}, nil, fmt.Errorf("adding the %s replica store: %w", kind.Name(), err)
	}
	namespaces, err := newNamespaceLister(ctx, mgr.GetCache())
	if err != nil {
		return door[T]{}, nil, err
	}
	engine := NewEngine(kind, replicas, o.Writers)
	engine.policy = o.Policy
	return door[T]{
		engine:          engine,
		policy:          o.Policy,
		namespaces:      namespaces,
		recorder:        mgr.GetEventRecorder(v1alpha1.FieldManager),
		metrics:         metrics,
		conflictRecheck: o.ConflictRecheck,
	}, replicas, nil
}

// listed is a cache, or a replica store, that can tell when it has listed once.
type listed interface {
	WaitForCacheSync(ctx context.Context) bool
}

// allSynced waits until every one of caches has listed; false when ctx ends first.
func allSynced(caches ...listed) func(context.Context) bool {
	return func(ctx context.Context) bool {
		for _, c := range caches {
			if !c.WaitForCacheSync(ctx) {
				return false
			}
		}
		return true
	}
}
