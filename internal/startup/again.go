package startup

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/replicator"
)

// A start serves what it can reach: the listed namespaces it may list in (Scope) and
// the explicit kinds whose CRD the API server serves (replicator.Served). Caches and
// controllers are built once, at the start, so cmsync serves more by starting again:
// one runnable checks every reason to, and the process then replaces itself (Exec).

// recheck is how often cmsync checks whether it can serve more than at its start.
const recheck = 30 * time.Second

// StartAgain is Run's error when cmsync stopped to start again: to serve more of the
// namespaces it lists, or to run the controller of a CRD installed since it started.
type StartAgain struct{ Reason string }

func (e StartAgain) Error() string { return "starting again: " + e.Reason }

// Exec starts cmsync again in this process (same pid, flags and environment), as a new
// start of the binary: its caches and controllers are built anew over what it can now
// serve. Run has returned: the manager has stopped and released the lease. Exec returns
// only by exiting, when the process cannot replace itself, so that it is restarted.
func (e StartAgain) Exec() {
	ctrl.Log.WithName("setup").Info("starting again", "reason", e.Reason)
	exe, err := os.Executable()
	if err == nil {
		err = syscall.Exec(exe, os.Args, os.Environ())
	}
	ctrl.Log.WithName("setup").Error(err, "cmsync could not start again; stopping so that it is restarted")
	os.Exit(1)
}

// AddStartAgain adds to mgr, which replicator.Setup has set up, the one runnable that
// checks every recheck whether cmsync can serve more than at its start — a namespace
// of scope.Waiting has become reachable for cs's identity, or the API server serves the
// CRD of a kind of served.WithoutCRD — and calls stop with the reason once it can. It
// runs in every process, leading or not, so that a standby starts again too.
func AddStartAgain(mgr ctrl.Manager, cs kubernetes.Interface, scope Scope, served replicator.Served, stop func(reason string)) error {
	var conditions []condition
	if len(scope.Waiting) > 0 {
		conditions = append(conditions, namespacesReachable(mgr.GetCache(), cs, scope))
	}
	if len(served.WithoutCRD) > 0 {
		conditions = append(conditions, crdsServed(mgr.GetRESTMapper(), served.WithoutCRD))
	}
	if len(conditions) == 0 {
		return nil
	}
	if err := mgr.Add(startAgain{conditions: conditions, synced: served.CachesSynced, stop: stop}); err != nil {
		return fmt.Errorf("adding the checks of what cmsync can serve: %w", err)
	}
	return nil
}

// condition is a reason to start again: "" while there is none.
type condition func(ctx context.Context) (reason string, err error)

// startAgain is the runnable AddStartAgain adds: every recheck it asks each condition,
// and calls stop with the first reason it gets.
type startAgain struct {
	conditions []condition
	// synced waits for the caches: the namespaces are read from the manager's, and a
	// start again while they still list would throw their work away.
	synced func(context.Context) bool
	stop   func(reason string)
}

func (s startAgain) Start(ctx context.Context) error {
	if !s.synced(ctx) {
		return nil
	}
	logger := log.FromContext(ctx).WithName("start-again")
	ticker := time.NewTicker(recheck)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		for _, holds := range s.conditions {
			reason, err := holds(ctx)
			if err != nil {
				logger.Error(err, "checking whether cmsync can serve more")
				continue
			}
			if reason != "" {
				s.stop(reason)
				return nil
			}
		}
	}
}

func (startAgain) NeedLeaderElection() bool { return false }

// namespacesReachable holds once a namespace of scope.Waiting is reachable. It reads
// the namespaces from the manager's cache, which holds every namespace's metadata.
func namespacesReachable(cache client.Reader, cs kubernetes.Interface, scope Scope) condition {
	return func(ctx context.Context) (string, error) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
		if err := cache.List(ctx, list); err != nil {
			return "", fmt.Errorf("listing namespaces from the cache: %w", err)
		}
		namespaces := make([]desired.Namespace, 0, len(list.Items))
		for i := range list.Items {
			namespaces = append(namespaces, desired.NamespaceOf(&list.Items[i]))
		}
		served, _, err := reachable(ctx, cs, namespaces, scope.Waiting, scope.secrets)
		if err != nil || len(served) == 0 {
			return "", err
		}
		return fmt.Sprintf("listed namespaces now reachable: %v", served), nil
	}
}

// crdsServed holds once the API server serves one of kinds.
func crdsServed(mapper meta.RESTMapper, kinds []schema.GroupVersionKind) condition {
	return func(context.Context) (string, error) {
		for _, gvk := range kinds {
			_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			switch {
			case err == nil:
				return "the API server now serves " + gvk.Kind, nil
			case !meta.IsNoMatchError(err):
				return "", fmt.Errorf("looking up the %s CRD: %w", gvk.Kind, err)
			}
		}
		return "", nil
	}
}

// whenSynced calls then once synced reports the caches listed. It runs in every
// process, leading or not: a standby fills its caches as the leader does.
type whenSynced struct {
	synced func(context.Context) bool
	then   func()
}

func (w whenSynced) Start(ctx context.Context) error {
	if w.synced(ctx) {
		w.then()
	}
	return nil // or stopping
}

func (whenSynced) NeedLeaderElection() bool { return false }
