package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// When --object-kinds names no kind the API server serves in namespaces — only a
// cluster-scoped kind, or only a kind whose CRD is not installed — the ObjectSync
// controller still runs: an ObjectSync naming that kind, or any other, is Invalid and
// says what to do, with an Event, and one deleted is let go (its finalizer removed).
// A kind not served is one cmsync starts again for once it is.
func TestObjectSyncWithNoEnabledKindServedIsInvalid(t *testing.T) {
	widgets := "w" + randomSuffix() + ".example.com"
	for _, tc := range []struct {
		name, kinds string
		source      v1alpha1.ObjectSource
		says        string
		// startsAgainFor is the kind Setup must name as one to start again for.
		startsAgainFor *schema.GroupVersionKind
	}{
		{
			name: "only a cluster-scoped kind", kinds: "rbac.authorization.k8s.io/v1/ClusterRole",
			source: v1alpha1.ObjectSource{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, says: "namespaced kinds only",
		},
		{
			name: "a kind not enabled, beside a cluster-scoped one", kinds: "rbac.authorization.k8s.io/v1/ClusterRole",
			source: v1alpha1.ObjectSource{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			says:   "networking.k8s.io/v1/NetworkPolicy to the controller's --object-kinds",
		},
		{
			name: "only a kind not served", kinds: widgets + "/v1/Widget",
			source: v1alpha1.ObjectSource{APIVersion: widgets + "/v1", Kind: "Widget"}, says: "install its CustomResourceDefinition",
			startsAgainFor: &schema.GroupVersionKind{Group: widgets, Version: "v1", Kind: "Widget"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcNS, dst := newNamespace(t, "src", nil), newNamespace(t, "dst", nil)
			running := startController(t, withObjectKinds(t, tc.kinds))
			defer running.Stop()
			if tc.startsAgainFor != nil && !slices.Contains(running.Served.WithoutCRD, *tc.startsAgainFor) {
				t.Errorf("Setup's kinds to start again for: %v, want %v among them", running.Served.WithoutCRD, *tc.startsAgainFor)
			}
			tc.source.Namespace, tc.source.Name = srcNS, "anything"
			sync := newObjectSync(t, v1alpha1.ObjectSyncSpec{Source: tc.source, DestinationNamespace: dst})
			got := waitForReady(t, sync, metav1.ConditionFalse, v1alpha1.ReasonInvalid)
			if ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(ready.Message, tc.says) {
				t.Errorf("message %q does not say %q", ready.Message, tc.says)
			}
			waitForEvent(t, sync, v1alpha1.ReasonInvalid, tc.says)

			must(t, k8s.Delete(context.Background(), sync))
			eventually(t, timeout, "the deleted ObjectSync gone", func() error {
				if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sync), &v1alpha1.ObjectSync{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the ObjectSync: %v", err)
				}
				return nil
			})
		})
	}
}
