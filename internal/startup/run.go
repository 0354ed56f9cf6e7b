// Package startup is how the cmsync process starts: its flags (Options), the
// connection and manager they make, what it serves (the namespaces of --namespaces it
// can reach, the explicit kinds whose CRD the API server serves), and the one path by
// which it starts again to serve more (AddStartAgain, StartAgain.Exec). main wires it;
// the controllers (replicator) know nothing of it.
package startup

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cmsync/cmsync/replicator"
)

// Run runs cmsync as o says until ctx ends, or until it can serve more than it
// started with: it then returns a StartAgain. started is called once the caches have
// listed, whether or not this process leads: the end of a start's burst.
func Run(ctx context.Context, o Options, started func()) error {
	replicate, err := o.replicatorOptions()
	if err != nil {
		return err
	}
	cfg, err := o.restConfig(ctx)
	if err != nil {
		return err
	}
	// The scope's checks are not writes of the leader's: their client is made before
	// the lease's fence wraps cfg, and asks in every process.
	scopeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	scope, err := ServedScope(ctx, scopeClient, replicate.Policy.Scope, replicate.Secrets)
	if err != nil {
		return err
	}
	replicate.Policy.Scope = scope.Served
	mgr, err := o.newManager(cfg, replicator.ManagerCacheOptions(replicate))
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	served, err := replicator.Setup(ctx, mgr, replicate)
	if err != nil {
		return err
	}
	startAgain := func(reason string) { stop(StartAgain{reason}) }
	if err := addRunnables(mgr, scopeClient, scope, served, startAgain, started); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting cmsync", "namespaces", replicate.Policy.Scope, "excludeNamespaces", replicate.Policy.ExcludeNamespaces,
		"sourceNamespaces", replicate.Policy.SourceNamespaces, "reservedNames", replicate.Policy.ReservedNames,
		"tenantLabel", replicate.Policy.TenantLabel, "secrets", o.secrets, "objectKinds", o.objectKinds, "controllerNamespace", replicate.Policy.ControllerNamespace)
	if len(replicate.ObjectKinds) > 0 && replicate.Policy.ControllerNamespace == "" {
		ctrl.Log.WithName("setup").Error(nil, "cmsync does not know its own namespace (no --leader-election-namespace, not in a Pod), "+
			"so ObjectSyncs are not kept out of it; give --leader-election-namespace")
	}
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	if cause := context.Cause(ctx); errors.As(cause, new(StartAgain)) {
		return cause
	}
	return nil
}

// addRunnables adds to mgr what the process runs besides the controllers: its health
// checks, the checks of what it could serve by starting again, and the signal that
// its caches have listed.
func addRunnables(mgr ctrl.Manager, cs kubernetes.Interface, scope Scope, served replicator.Served, startAgain func(string), started func()) error {
	if err := addHealthChecks(mgr); err != nil {
		return err
	}
	if err := AddStartAgain(mgr, cs, scope, served, startAgain); err != nil {
		return err
	}
	if err := mgr.Add(whenSynced{synced: served.CachesSynced, then: started}); err != nil {
		return fmt.Errorf("adding the caches' start signal: %w", err)
	}
	return nil
}
