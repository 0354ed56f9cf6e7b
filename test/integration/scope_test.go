package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/replicator"
)

// withScope runs the controller with --namespaces.
func withScope(namespaces ...string) controllerOption {
	return func(o *replicator.Options) {
		o.Policy.Scope = slices.Sorted(slices.Values(namespaces))
	}
}

// In scoped mode the controller serves its namespaces alone: a source there fans out
// to the served namespaces its glob matches and to no other; a labelled source in a
// namespace outside is never read and gets no status; drift is repaired and the
// source's deletion cleans up; and no request about ConfigMaps or Secrets leaves the
// served namespaces (no cluster-wide list or watch, nothing outside).
func TestScopedModeServesOnlyItsNamespaces(t *testing.T) {
	prefix := "scope" + randomSuffix()
	src, in, out, elsewhere := newNamespace(t, prefix, nil), newNamespace(t, prefix, nil), newNamespace(t, prefix, nil), newNamespace(t, prefix, nil)
	c := startController(t, withSecrets(), withScope(src, in))
	glob := map[string]string{v1alpha1.TargetNamespacesAnnotation: prefix + "-*"}
	source := newSource(t, src, "app", glob, map[string]string{"k": "v"})
	outside := newSource(t, elsewhere, "app", glob, map[string]string{"k": "v"})
	waitForReplicasIn(t, source, in)
	waitForSynced(t, source, "1/1")

	// Drift repaired, then the deletion cleans up.
	replica, err := getConfigMap(in, "app")
	must(t, err)
	update(t, replica, func(cm *corev1.ConfigMap) { cm.Data["k"] = "edited" })
	eventually(t, 30*time.Second, "the edited replica restored", func() error {
		r, err := getConfigMap(in, "app")
		if err != nil || r.Data["k"] != "v" {
			return fmt.Errorf("replica %v, err %v", r.Data, err)
		}
		return nil
	})
	must(t, k8s.Delete(context.Background(), source))
	waitForReplicasIn(t, source)

	// The source outside was never read: no replica, no status, no request.
	now, err := getConfigMap(elsewhere, outside.Name)
	must(t, err)
	if _, ok := now.Annotations[v1alpha1.StatusAnnotation]; ok {
		t.Errorf("a source outside the scope got a status: %v", now.Annotations)
	}
	if _, err := getConfigMap(out, "app"); err == nil {
		t.Errorf("a replica was written into %s, outside the scope", out)
	}
	for _, request := range c.KindRequests() {
		if !strings.Contains(request, "/namespaces/"+src+"/") && !strings.Contains(request, "/namespaces/"+in+"/") {
			t.Errorf("a request outside the served namespaces: %s", request)
		}
	}
}

// Scoped mode composes with the other policies: with the tenant boundary on, a
// tenant's source reaches its own served namespace, not another tenant's (served, not
// accepting) nor its own tenant's unserved one; and its shape (target-name, keys)
// applies to the replica.
func TestScopedModeWithTenancyAndShaping(t *testing.T) {
	tenant := "t" + randomSuffix()
	src := newNamespace(t, "sct", map[string]string{tenantLabel: tenant})
	mine := newNamespace(t, "sct", map[string]string{tenantLabel: tenant})
	mineUnserved := newNamespace(t, "sct", map[string]string{tenantLabel: tenant})
	other := newNamespace(t, "sco", map[string]string{tenantLabel: "other" + tenant})
	c := startController(t, withTenantLabel(), withScope(src, mine, other))
	source := newSource(t, src, "app", map[string]string{
		v1alpha1.TargetNamespacesAnnotation: strings.Join([]string{mine, mineUnserved, other}, ","),
		v1alpha1.TargetNameAnnotation:       "app-copy",
		v1alpha1.KeysAnnotation:             "keep",
	}, map[string]string{"keep": "1", "drop": "2"})
	waitForSynced(t, source, "1/1")
	replica, err := getConfigMap(mine, "app-copy")
	must(t, err)
	if len(replica.Data) != 1 || replica.Data["keep"] != "1" {
		t.Errorf("the replica's data %v, want only keep=1", replica.Data)
	}
	for _, ns := range []string{mineUnserved, other} {
		if _, err := getConfigMap(ns, "app-copy"); err == nil {
			t.Errorf("a replica in %s", ns)
		}
	}
	for _, request := range c.KindRequests() {
		if strings.Contains(request, "/namespaces/"+mineUnserved+"/") {
			t.Errorf("a request into the unserved namespace: %s", request)
		}
	}
}
