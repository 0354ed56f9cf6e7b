//go:build e2e

package scoped

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/test/harness"
)

// objectKind is the kind the chart lists in objectSync.kinds here.
const objectKind = "networking.k8s.io/v1/NetworkPolicy"

// An ObjectSync works under the chart's Roles alone: the ClusterRole grants nothing on
// NetworkPolicies, the served destinations get their replica, a served namespace's own
// policy of the same name is left alone and reported, an unserved destination gets
// nothing, the source's change reaches the replica, the ObjectSync's deletion cleans up,
// and no request about NetworkPolicies leaves the served namespaces.
func TestScopedObjectSync(t *testing.T) {
	harness.SkipOnExistingCluster(t) // it runs cmsync with --object-kinds, as the chart renders it
	ctx := context.Background()
	role := &rbacv1.ClusterRole{}
	must(t, harness.K8s.Get(ctx, client.ObjectKey{Name: harness.Release}, role))
	for _, rule := range role.Rules {
		if slices.Contains(rule.Resources, "networkpolicies") {
			t.Errorf("scoped mode: the ClusterRole grants %v on NetworkPolicies", rule.Verbs)
		}
	}
	tail := harness.NewAuditTail(t)
	c := harness.StartControllerWithEnv(t, []string{"KUBE_FEATURE_WatchListClient=false"}, append(slices.Clone(cmsyncArgs), "--object-kinds="+objectKind)...)
	theirs := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: bNS, Name: "default-deny"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}}
	source := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "default-deny"}}
	for _, obj := range []client.Object{theirs, source} {
		must(t, harness.K8s.Create(ctx, obj))
	}
	sync := &v1alpha1.ObjectSync{ObjectMeta: metav1.ObjectMeta{Name: "scoped-deny"}, Spec: v1alpha1.ObjectSyncSpec{
		Source:                v1alpha1.ObjectSource{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: srcNS, Name: "default-deny"},
		DestinationNamespaces: []string{aNS, bNS, outNS}}}
	must(t, harness.K8s.Create(ctx, sync))
	eventually(t, 60*time.Second, "the ObjectSync in sync where it may be", func() error {
		must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(sync), sync))
		if sync.Status.Synced != "1/2" || len(sync.Status.FailedNamespaces) != 1 || sync.Status.FailedNamespaces[0].Namespace != bNS {
			return fmt.Errorf("synced %q, failed %+v", sync.Status.Synced, sync.Status.FailedNamespaces)
		}
		return nil
	})
	replica := &networkingv1.NetworkPolicy{}
	must(t, harness.K8s.Get(ctx, client.ObjectKey{Namespace: aNS, Name: "default-deny"}, replica))
	if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: outNS, Name: "default-deny"}, &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s, outside the scope, holds a replica (%v)", outNS, err)
	}

	source.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	must(t, harness.K8s.Update(ctx, source))
	eventually(t, 60*time.Second, "the replica follows its source", func() error {
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(replica), replica); err != nil {
			return err
		}
		if len(replica.Spec.PolicyTypes) != 2 {
			return fmt.Errorf("policyTypes %v", replica.Spec.PolicyTypes)
		}
		return nil
	})
	must(t, harness.K8s.Delete(ctx, sync))
	eventually(t, 60*time.Second, "the replica deleted", func() error {
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(replica), replica); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(theirs), theirs))
	if theirs.Labels[v1alpha1.ManagedByLabel] != "" || len(theirs.Spec.PolicyTypes) != 1 {
		t.Errorf("cmsync changed %s's own policy: %+v", bNS, theirs)
	}
	c.Stop()
	for _, r := range tail.Next(t) {
		if r.User.Username == harness.CmsyncUser && r.ObjectRef != nil && r.ObjectRef.Resource == "networkpolicies" &&
			!slices.Contains(listed, r.ObjectRef.Namespace) {
			t.Errorf("a request about NetworkPolicies outside the served namespaces: %s %s", r.Verb, r.RequestURI)
		}
	}
}
