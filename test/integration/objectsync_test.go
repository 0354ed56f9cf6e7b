package integration

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
	"github.com/cmsync/cmsync/replicator"
)

// withObjectKinds runs the controller with --object-kinds=kinds.
func withObjectKinds(t *testing.T, kinds string) controllerOption {
	t.Helper()
	parsed, err := desired.ParseObjectKinds(kinds)
	must(t, err)
	return func(o *replicator.Options) { o.ObjectKinds = parsed }
}

const policiesAndLimits = "networking.k8s.io/v1/NetworkPolicy,v1/LimitRange"

func newObjectSync(t *testing.T, spec v1alpha1.ObjectSyncSpec) *v1alpha1.ObjectSync {
	t.Helper()
	sync := &v1alpha1.ObjectSync{ObjectMeta: metav1.ObjectMeta{Name: "osync-" + randomSuffix()}, Spec: spec}
	must(t, k8s.Create(context.Background(), sync))
	return sync
}

func policySource(namespace, name string) v1alpha1.ObjectSource {
	return v1alpha1.ObjectSource{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: namespace, Name: name}
}

// defaultDenyPolicy creates a NetworkPolicy admitting only port 80, and returns it as
// the API server stored it: its policyTypes and its port's protocol are the server's
// defaults, not the creator's.
func defaultDenyPolicy(t *testing.T, namespace string) *networkingv1.NetworkPolicy {
	t.Helper()
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "default-deny", Labels: map[string]string{"team": "platform"}},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(80))}},
		}}},
	}
	must(t, k8s.Create(context.Background(), np))
	if len(np.Spec.PolicyTypes) == 0 || np.Spec.Ingress[0].Ports[0].Protocol == nil {
		t.Fatalf("the API server defaulted nothing: %+v", np.Spec)
	}
	return np
}

// policyReplicas reads the NetworkPolicies that sync owns, by namespace.
func policyReplicas(t *testing.T, sync *v1alpha1.ObjectSync) map[string]*networkingv1.NetworkPolicy {
	t.Helper()
	var list networkingv1.NetworkPolicyList
	must(t, k8s.List(context.Background(), &list, client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}))
	replicas := map[string]*networkingv1.NetworkPolicy{}
	for i, np := range list.Items {
		if ref := metav1.GetControllerOf(&np); ref != nil && ref.UID == sync.UID && ref.Kind == v1alpha1.ObjectSyncKind {
			replicas[np.Namespace] = &list.Items[i]
		}
	}
	return replicas
}

// waitForPolicyReplicas waits until sync's replicas are in exactly the namespaces given,
// each with spec, and returns them.
func waitForPolicyReplicas(
	t *testing.T,
	sync *v1alpha1.ObjectSync,
	spec networkingv1.NetworkPolicySpec,
	want ...string,
) map[string]*networkingv1.NetworkPolicy {
	t.Helper()
	var replicas map[string]*networkingv1.NetworkPolicy
	eventually(t, timeout, "replicas of "+sync.Name, func() error {
		replicas = policyReplicas(t, sync)
		var in []string
		for ns, np := range replicas {
			in = append(in, ns)
			if !equality.Semantic.DeepEqual(np.Spec, spec) {
				return fmt.Errorf("replica in %s has spec %+v, want %+v", ns, np.Spec, spec)
			}
		}
		if !sameSet(in, want) {
			return fmt.Errorf("replicas in %v, want %v", in, want)
		}
		return nil
	})
	return replicas
}

// replicaVersions reads the resourceVersions of sync's replicas, of the kind its source
// names, by namespace.
func replicaVersions(t *testing.T, sync *v1alpha1.ObjectSync) map[string]string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.FromAPIVersionAndKind(sync.Spec.Source.APIVersion, sync.Spec.Source.Kind+"List"))
	must(t, k8s.List(context.Background(), list, client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}))
	versions := map[string]string{}
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == sync.UID {
			versions[list.Items[i].GetNamespace()] = list.Items[i].GetResourceVersion()
		}
	}
	return versions
}

// settled waits until the passes the test set off are over: each sync's current Ready
// condition has been announced (a pass's Event follows its status write), and then c
// has written nothing for a second (a repair's status write follows the replica the
// test saw repaired). Measured from before either, an idle window counts their writes.
func settled(t *testing.T, c *controllerUnderTest, syncs ...*v1alpha1.ObjectSync) {
	t.Helper()
	for _, sync := range syncs {
		now := &v1alpha1.ObjectSync{}
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(sync), now))
		ready := meta.FindStatusCondition(now.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil {
			t.Fatalf("%s has no Ready condition", sync.Name)
		}
		waitForAnnouncement(t, sync, fmt.Sprintf("%s (%s)", ready.Message, now.Status.Synced))
	}
	eventually(t, timeout, "the controller's writes to stop", func() error {
		before := c.Writes()
		time.Sleep(time.Second)
		if n := c.Writes() - before; n != 0 {
			return fmt.Errorf("%d writes in a second; last writes:\n%s", n, c.LastWrites())
		}
		return nil
	})
}

// waitForAnnouncement waits for an Event about sync, of any reason (a Degraded pass
// announces the reason of its failure), whose note is note.
func waitForAnnouncement(t *testing.T, sync *v1alpha1.ObjectSync, note string) {
	t.Helper()
	eventually(t, timeout, "the Event announcing "+sync.Name+"'s status", func() error {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == sync.Name && e.Regarding.Kind == v1alpha1.ObjectSyncKind && e.Note == note {
				return nil
			}
		}
		return fmt.Errorf("no Event about %s says %q", sync.Name, note)
	})
}

// assertIdle asserts that, once settled, c writes nothing for d and no replica of the
// syncs changes.
func assertIdle(t *testing.T, c *controllerUnderTest, d time.Duration, syncs ...*v1alpha1.ObjectSync) {
	t.Helper()
	settled(t, c, syncs...)
	assertWritesNothing(t, c, d, syncs...)
}

// assertWritesNothing asserts that c writes nothing from now for d, and that no replica of
// the syncs changes. Called as soon as startController returns (its access reviews
// made, no pass begun), it checks a start over replicas in sync, first passes included.
func assertWritesNothing(t *testing.T, c *controllerUnderTest, d time.Duration, syncs ...*v1alpha1.ObjectSync) {
	t.Helper()
	since := c.Writes()
	versions := map[string]map[string]string{}
	for _, sync := range syncs {
		versions[sync.Name] = replicaVersions(t, sync)
	}
	consistently(t, d, "idle", func() error {
		if w := c.Writes() - since; w != 0 {
			return errorf("%d writes while idle; last writes:\n%s", w, c.LastWrites())
		}
		for _, sync := range syncs {
			if now := replicaVersions(t, sync); !maps.Equal(now, versions[sync.Name]) {
				return errorf("replicas of %s written: resourceVersions %v, were %v", sync.Name, now, versions[sync.Name])
			}
		}
		return nil
	})
}

// A NetworkPolicy whose policyTypes and port protocol the API server defaults is fanned
// out, and then left alone: idle, and after a restart, cmsync writes nothing. Its
// replicas follow the source, are repaired, reach a namespace created later, and go
// when the ObjectSync is deleted (envtest runs no garbage collector: the finalizer does
// it).
func TestObjectSyncFansOutANetworkPolicyAndWritesNothingIdle(t *testing.T) {
	srcNS := newNamespace(t, "src", nil)
	group, targets := newGroup(t, "osync", 3)
	src := defaultDenyPolicy(t, srcNS)
	running := startController(t, withObjectKinds(t, policiesAndLimits))
	sync := newObjectSync(t, v1alpha1.ObjectSyncSpec{
		Source: policySource(srcNS, src.Name), NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"group": group}},
	})
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "3/3")
	replicas := waitForPolicyReplicas(t, sync, src.Spec, targets...)
	for ns, np := range replicas {
		if np.Labels["team"] != "platform" || np.Labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue ||
			np.Annotations[v1alpha1.SourceAnnotation] != srcNS+"/default-deny" || np.Name != "default-deny" {
			t.Errorf("replica in %s: %s, labels %v, annotations %v", ns, np.Name, np.Labels, np.Annotations)
		}
	}
	if n := kindMetricValue(t, running.Metrics, "cmsync_replicas", "NetworkPolicy", "synced"); n != 3 {
		t.Errorf("cmsync_replicas{kind=NetworkPolicy,state=synced} = %v, want 3", n)
	}
	assertIdle(t, running, 5*time.Second, sync)

	running.Stop()
	restarted := startController(t, withObjectKinds(t, policiesAndLimits))
	assertWritesNothing(t, restarted, 8*time.Second, sync)
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "3/3")

	// The source changes.
	update(t, src, func(np *networkingv1.NetworkPolicy) {
		np.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
		np.Spec.Ingress = nil
	})
	replicas = waitForPolicyReplicas(t, sync, src.Spec, targets...)

	// Drift: an edited replica is restored, a deleted one recreated.
	update(t, replicas[targets[0]], func(np *networkingv1.NetworkPolicy) { np.Spec.PodSelector.MatchLabels["app"] = "db" })
	must(t, k8s.Delete(context.Background(), replicas[targets[1]]))
	waitForPolicyReplicas(t, sync, src.Spec, targets...)
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "3/3")
	assertIdle(t, restarted, 3*time.Second, sync)

	// A namespace created later gets its replica.
	later := newNamespace(t, "dst", map[string]string{"group": group})
	waitForPolicyReplicas(t, sync, src.Spec, append(targets, later)...)
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "4/4")
	if n := kindMetricValue(t, restarted.Metrics, "cmsync_sources", "NetworkPolicy", ""); n != 1 {
		t.Errorf("cmsync_sources{kind=NetworkPolicy} = %v, want 1", n)
	}

	must(t, k8s.Delete(context.Background(), sync))
	eventually(t, timeout, "the ObjectSync and its replicas gone", func() error {
		if left := policyReplicas(t, sync); len(left) != 0 {
			return fmt.Errorf("replicas left in %d namespaces", len(left))
		}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sync), &v1alpha1.ObjectSync{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the ObjectSync is still there: %v", err)
		}
		return nil
	})
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(src), &networkingv1.NetworkPolicy{}); err != nil {
		t.Errorf("the source: %v", err)
	}
}

// An object cmsync did not create is never touched: the ObjectSync reports the conflict
// and fills every other target.
func TestObjectSyncConflictWithAnObjectCmsyncDidNotCreate(t *testing.T) {
	srcNS, free, taken := newNamespace(t, "src", nil), newNamespace(t, "dst", nil), newNamespace(t, "dst", nil)
	src := defaultDenyPolicy(t, srcNS)
	theirs := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: src.Name},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
	}
	must(t, k8s.Create(context.Background(), theirs))
	startController(t, withObjectKinds(t, policiesAndLimits))
	sync := newObjectSync(t, v1alpha1.ObjectSyncSpec{Source: policySource(srcNS, src.Name), DestinationNamespaces: []string{free, taken}})

	got := waitForReadyCount(t, sync, metav1.ConditionFalse, v1alpha1.ReasonDegraded, "1/2")
	if f := got.Status.FailedNamespaces; len(f) != 1 || f[0].Namespace != taken || f[0].Reason != v1alpha1.ReasonConflict ||
		!strings.Contains(f[0].Message, "not managed by cmsync") {
		t.Errorf("failed namespaces %+v", f)
	}
	waitForEvent(t, sync, v1alpha1.ReasonConflict, taken)
	waitForPolicyReplicas(t, sync, src.Spec, free)
	consistently(t, 3*time.Second, "their NetworkPolicy untouched", func() error {
		now := &networkingv1.NetworkPolicy{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(theirs), now); err != nil {
			return err
		}
		if now.ResourceVersion != theirs.ResourceVersion {
			return fmt.Errorf("written: labels %v, spec %+v", now.Labels, now.Spec)
		}
		return nil
	})

	must(t, k8s.Delete(context.Background(), sync))
	eventually(t, timeout, "cleanup leaves their NetworkPolicy", func() error {
		if left := policyReplicas(t, sync); len(left) != 0 {
			return fmt.Errorf("replicas left: %d", len(left))
		}
		return k8s.Get(context.Background(), client.ObjectKeyFromObject(theirs), &networkingv1.NetworkPolicy{})
	})
}

// An ObjectSync that names a kind it may not copy is Invalid, saying what to do, and
// cmsync makes no request about a kind that is not enabled, nor about one it cannot
// serve: the API server's audit log of every request of its identity has none.
func TestObjectSyncOfAKindItMayNotCopyIsInvalid(t *testing.T) {
	srcNS, dst := newNamespace(t, "src", nil), newNamespace(t, "dst", nil)
	running := startAuditedController(
		t,
		withObjectKinds(t, "networking.k8s.io/v1/NetworkPolicy,rbac.authorization.k8s.io/v1/ClusterRole,example.com/v1/Widget"),
	)
	for _, tc := range []struct {
		name   string
		source v1alpha1.ObjectSource
		says   string
	}{
		{"not enabled", v1alpha1.ObjectSource{APIVersion: "v1", Kind: "LimitRange"}, "v1/LimitRange to the controller's --object-kinds"},
		{"a ConfigMap", v1alpha1.ObjectSource{APIVersion: "v1", Kind: "ConfigMap"}, "ConfigMapSync"},
		{"a Secret", v1alpha1.ObjectSource{APIVersion: "v1", Kind: "Secret"}, "SecretSync"},
		{"cluster-scoped", v1alpha1.ObjectSource{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, "namespaced kinds only"},
		{"not served", v1alpha1.ObjectSource{APIVersion: "example.com/v1", Kind: "Widget"}, "install its CustomResourceDefinition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.source.Namespace, tc.source.Name = srcNS, "anything"
			sync := newObjectSync(t, v1alpha1.ObjectSyncSpec{Source: tc.source, DestinationNamespace: dst})
			got := waitForReady(t, sync, metav1.ConditionFalse, v1alpha1.ReasonInvalid)
			if ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(ready.Message, tc.says) {
				t.Errorf("message %q does not say %q", ready.Message, tc.says)
			}
			waitForEvent(t, sync, v1alpha1.ReasonInvalid, tc.says)
		})
	}
	audited := running.Audited(t)
	if len(about(audited, "networkpolicies")) == 0 || len(about(audited, "objectsyncs")) == 0 {
		t.Fatalf("the audit log shows no request of cmsync's about the kinds it serves (%d records): it proves nothing", len(audited))
	}
	for _, kind := range []string{"limitranges", "clusterroles", "widgets"} {
		if requests := about(audited, kind); len(requests) != 0 {
			t.Errorf("requests about %s: %v", kind, requests)
		}
	}
	if n := notSynced(t, running.Metrics, "LimitRange", v1alpha1.ReasonInvalid); n < 1 {
		t.Errorf("cmsync_sources_not_synced{kind=LimitRange,reason=Invalid} = %v", n)
	}
}

// An ObjectSync whose source changes kind moves its replicas: those of the kind it
// named are deleted, those of the new kind (a LimitRange, whose defaults the API
// server fills in too) are made.
func TestObjectSyncChangingKindMovesItsReplicas(t *testing.T) {
	srcNS, dst := newNamespace(t, "src", nil), newNamespace(t, "dst", nil)
	src := defaultDenyPolicy(t, srcNS)
	limits := &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "default-deny"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		}}},
	}
	must(t, k8s.Create(context.Background(), limits))
	if limits.Spec.Limits[0].Default == nil {
		t.Fatalf("the API server defaulted nothing: %+v", limits.Spec)
	}
	running := startController(t, withObjectKinds(t, policiesAndLimits))
	sync := newObjectSync(t, v1alpha1.ObjectSyncSpec{Source: policySource(srcNS, src.Name), DestinationNamespace: dst})
	waitForPolicyReplicas(t, sync, src.Spec, dst)

	update(t, sync, func(s *v1alpha1.ObjectSync) {
		s.Spec.Source = v1alpha1.ObjectSource{APIVersion: "v1", Kind: "LimitRange", Namespace: srcNS, Name: limits.Name}
	})
	waitForPolicyReplicas(t, sync, src.Spec)
	eventually(t, timeout, "the LimitRange replica", func() error {
		replica := &corev1.LimitRange{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: dst, Name: limits.Name}, replica); err != nil {
			return err
		}
		if !equality.Semantic.DeepEqual(replica.Spec, limits.Spec) || metav1.GetControllerOf(replica) == nil {
			return fmt.Errorf("replica spec %+v, owner %v", replica.Spec, replica.OwnerReferences)
		}
		return nil
	})
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "1/1")
	assertIdle(t, running, 4*time.Second, sync)
}

// widgetCRDIn installs a namespaced custom resource, Widget, in group, whose schema
// defaults spec.size, and returns the group.
func widgetCRDIn(t *testing.T, group string) string {
	t.Helper()
	scheme := newScheme()
	must(t, apiextensionsv1.AddToScheme(scheme))
	c, err := client.New(restConfig, client.Options{Scheme: scheme})
	must(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"size":   {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"small"`)}},
							"colour": {Type: "string"},
						}},
						"status": {Type: "object", XPreserveUnknownFields: ptr(true)},
					},
				}},
			}},
		},
	}
	must(t, c.Create(context.Background(), crd))
	eventually(t, timeout, "the Widget CRD established", func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(crd), crd); err != nil {
			return err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", crd.Status.Conditions)
	})
	// Established comes before discovery lists the group; the tests' client maps kinds
	// through discovery, so a Widget is created only once it is listed there.
	eventually(t, timeout, "the Widget kind in discovery", func() error {
		_, err := k8s.RESTMapper().RESTMapping(schema.GroupKind{Group: group, Kind: "Widget"}, "v1")
		return err
	})
	return group
}

func widget(group, namespace, name string) *unstructured.Unstructured {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"})
	w.SetNamespace(namespace)
	w.SetName(name)
	return w
}

// A custom resource whose CRD is installed after cmsync started, beside kinds it serves
// or as the only kind enabled: an ObjectSync naming it is Invalid, and cmsync says it
// must start again to serve it (replicator.Served); started again, it fans the resource
// out, its schema's defaults included, and writes nothing more. An ObjectSync deleted
// while cmsync is down loses its replicas at the next start.
func TestObjectSyncOfACustomResourceInstalledAfterTheStart(t *testing.T) {
	for _, tc := range []struct{ name, beside string }{
		{"beside served kinds", policiesAndLimits + ","},
		{"the only kind enabled", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcNS, dst := newNamespace(t, "src", nil), newNamespace(t, "dst", nil)
			group := "w" + randomSuffix() + ".example.com"
			kinds := tc.beside + group + "/v1/Widget"
			running := startController(t, withObjectKinds(t, kinds))
			gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"}
			if !slices.Contains(running.Served.WithoutCRD, gvk) {
				t.Errorf("Setup's kinds to start again for: %v, want %v among them", running.Served.WithoutCRD, gvk)
			}
			sync := newObjectSync(t, v1alpha1.ObjectSyncSpec{
				Source: v1alpha1.ObjectSource{APIVersion: group + "/v1", Kind: "Widget", Namespace: srcNS, Name: "blue"}, DestinationNamespace: dst,
			})
			waitForReady(t, sync, metav1.ConditionFalse, v1alpha1.ReasonInvalid)

			src := widget(widgetCRDIn(t, group), srcNS, "blue")
			must(t, unstructured.SetNestedField(src.Object, "blue", "spec", "colour"))
			must(t, k8s.Create(context.Background(), src))
			if size, _, _ := unstructured.NestedString(src.Object, "spec", "size"); size != "small" {
				t.Fatalf("the schema's default was not applied: %v", src.Object["spec"])
			}

			running.Stop()
			restarted := startController(t, withObjectKinds(t, kinds))
			waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "1/1")
			replica := widget(group, dst, "blue")
			must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(replica), replica))
			if !equality.Semantic.DeepEqual(replica.Object["spec"], src.Object["spec"]) || metav1.GetControllerOf(replica) == nil {
				t.Errorf("replica spec %v (owner %v), want %v", replica.Object["spec"], replica.GetOwnerReferences(), src.Object["spec"])
			}
			assertIdle(t, restarted, 4*time.Second, sync)

			restarted.Stop()
			must(t, k8s.Delete(context.Background(), sync))
			startController(t, withObjectKinds(t, kinds))
			eventually(t, timeout, "the replica and the ObjectSync deleted while cmsync was down gone", func() error {
				if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(replica), widget(group, dst, "blue")); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the replica: %v", err)
				}
				if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sync), &v1alpha1.ObjectSync{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the ObjectSync: %v", err)
				}
				return nil
			})
		})
	}
}

// A Role and a RoleBinding fan out, and stay as they are while idle. A RoleBinding's
// roleRef cannot change in place: when the source is made anew with another role, its
// replicas are deleted and created anew.
func TestObjectSyncOfARoleAndItsBinding(t *testing.T) {
	srcNS, a, b := newNamespace(t, "src", nil), newNamespace(t, "dst", nil), newNamespace(t, "dst", nil)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}},
	}
	must(t, k8s.Create(context.Background(), role))
	bindingTo := func(roleName string) *rbacv1.RoleBinding {
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "readers"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "team-readers"}},
		}
		must(t, k8s.Create(context.Background(), binding))
		return binding
	}
	binding := bindingTo("pod-reader")
	running := startController(t, withObjectKinds(t, "rbac.authorization.k8s.io/v1/Role,rbac.authorization.k8s.io/v1/RoleBinding"))
	rbac := func(kind, name string) v1alpha1.ObjectSource {
		return v1alpha1.ObjectSource{APIVersion: "rbac.authorization.k8s.io/v1", Kind: kind, Namespace: srcNS, Name: name}
	}
	roles := newObjectSync(t, v1alpha1.ObjectSyncSpec{Source: rbac("Role", role.Name), DestinationNamespaces: []string{a, b}})
	bindings := newObjectSync(t, v1alpha1.ObjectSyncSpec{Source: rbac("RoleBinding", binding.Name), DestinationNamespaces: []string{a, b}})
	waitForReadyCount(t, roles, metav1.ConditionTrue, v1alpha1.ReasonSynced, "2/2")
	waitForReadyCount(t, bindings, metav1.ConditionTrue, v1alpha1.ReasonSynced, "2/2")
	replicaBinding := func(ns string) (*rbacv1.RoleBinding, error) {
		rb := &rbacv1.RoleBinding{}
		return rb, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: binding.Name}, rb)
	}
	first := map[string]types.UID{}
	for _, ns := range []string{a, b} {
		r := &rbacv1.Role{}
		must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: role.Name}, r))
		rb, err := replicaBinding(ns)
		must(t, err)
		if !equality.Semantic.DeepEqual(r.Rules, role.Rules) || rb.RoleRef != binding.RoleRef || !equality.Semantic.DeepEqual(rb.Subjects, binding.Subjects) {
			t.Errorf("replicas in %s: rules %+v, roleRef %+v, subjects %+v", ns, r.Rules, rb.RoleRef, rb.Subjects)
		}
		first[ns] = rb.UID
	}
	assertIdle(t, running, 3*time.Second, roles, bindings)

	must(t, k8s.Delete(context.Background(), binding))
	binding = bindingTo("admin-of-pods")
	eventually(t, timeout, "replica bindings made anew with the new role", func() error {
		for _, ns := range []string{a, b} {
			rb, err := replicaBinding(ns)
			if err != nil {
				return err
			}
			if rb.RoleRef.Name != "admin-of-pods" || rb.UID == first[ns] {
				return fmt.Errorf("in %s: roleRef %+v, the same object %v", ns, rb.RoleRef, rb.UID == first[ns])
			}
		}
		return nil
	})
	waitForReadyCount(t, bindings, metav1.ConditionTrue, v1alpha1.ReasonSynced, "2/2")
}

// The CRD's schema refuses what it can tell is wrong, with a message the user sees.
func TestObjectSyncSpecIsCheckedAtAdmission(t *testing.T) {
	src := policySource("platform", "default-deny")
	for _, tc := range []struct {
		name string
		spec v1alpha1.ObjectSyncSpec
		says string
	}{
		{"no target", v1alpha1.ObjectSyncSpec{Source: src}, "set destinationNamespace, destinationNamespaces"},
		{"only exclusions", v1alpha1.ObjectSyncSpec{Source: src, DestinationNamespaces: []string{"!team-a"}}, "set destinationNamespace"},
		{"onto itself", v1alpha1.ObjectSyncSpec{Source: src, DestinationNamespace: "platform"}, "must differ from source.namespace"},
		{"a resource for a kind", v1alpha1.ObjectSyncSpec{Source: v1alpha1.ObjectSource{APIVersion: "networking.k8s.io/v1", Kind: "networkpolicies",
			Namespace: "platform", Name: "x"}, DestinationNamespace: "team-a"}, "spec.source.kind"},
		{"a malformed apiVersion", v1alpha1.ObjectSyncSpec{Source: v1alpha1.ObjectSource{APIVersion: "networking.k8s.io", Kind: "NetworkPolicy",
			Namespace: "platform", Name: "x"}, DestinationNamespace: "team-a"}, "spec.source.apiVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sync := &v1alpha1.ObjectSync{ObjectMeta: metav1.ObjectMeta{Name: "osync-" + randomSuffix()}, Spec: tc.spec}
			err := k8s.Create(context.Background(), sync)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("created: %v; want it refused saying %q", err, tc.says)
			}
		})
	}
}

// In scoped mode (--namespaces) an ObjectSync reaches the served namespaces alone, and
// no request about its kind leaves them: the chart can grant the kind by a Role in each.
func TestObjectSyncInScopedMode(t *testing.T) {
	prefix := "oscope" + randomSuffix()
	srcNS, in, out := newNamespace(t, prefix, nil), newNamespace(t, prefix, nil), newNamespace(t, prefix, nil)
	src := defaultDenyPolicy(t, srcNS)
	c := startController(t, withScope(srcNS, in), withObjectKinds(t, policiesAndLimits))
	sync := newObjectSync(t, v1alpha1.ObjectSyncSpec{Source: policySource(srcNS, src.Name), DestinationNamespaces: []string{prefix + "-*"}})
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "1/1")
	waitForPolicyReplicas(t, sync, src.Spec, in)
	if len(c.RequestsAbout("networkpolicies")) == 0 {
		t.Fatal("no request about NetworkPolicies was seen")
	}
	for _, kind := range []string{"networkpolicies", "limitranges"} {
		for _, request := range c.RequestsAbout(kind) {
			if ns := namespaceOf(strings.Fields(request)[1]); ns != srcNS && ns != in {
				t.Errorf("a request about %s outside the served namespaces: %s", kind, request)
			}
		}
	}
	if n := c.WritesIn("POST", out); n != 0 {
		t.Errorf("%d creates in %s, outside the scope", n, out)
	}
}

// An enabled kind cmsync may not read and write where it serves stops the start,
// naming what is missing, instead of a replica store that never lists.
func TestObjectKindsWithoutTheirGrantsStopTheStart(t *testing.T) {
	user := "cmsync-objects-" + randomSuffix()
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	kinds := withObjectKinds(t, "networking.k8s.io/v1/NetworkPolicy")
	setUp := func() error {
		_, _, err := setupWith(t, &controlplane.Env{Config: cfg}, func(o *replicator.Options) { kinds(o) })
		return err
	}
	if err := setUp(); err == nil || !strings.Contains(err.Error(), "--object-kinds: cmsync may not get networkpolicies.networking.k8s.io in every namespace") {
		t.Fatalf("without grants: %v", err)
	}

	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}},
	}
	must(t, k8s.Create(context.Background(), role))
	must(t, k8s.Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
	}))
	eventually(t, timeout, "the start names the one verb missing", func() error {
		if err := setUp(); err == nil || !strings.Contains(err.Error(), "may not delete networkpolicies.networking.k8s.io") {
			return fmt.Errorf("without delete: %v", err)
		}
		return nil
	})
	update(t, role, func(r *rbacv1.ClusterRole) { r.Rules[0].Verbs = append(r.Rules[0].Verbs, "delete") })
	eventually(t, timeout, "the start with every grant", setUp)
}

// A field another writer owns never causes a write: a replica whose spec someone gave a
// field the source does not set is in sync, and keeps that field when the source's
// next change is written over it.
func TestObjectSyncLeavesTheFieldsOthersWrote(t *testing.T) {
	srcNS, dst := newNamespace(t, "src", nil), newNamespace(t, "dst", nil)
	src := defaultDenyPolicy(t, srcNS)
	running := startController(t, withObjectKinds(t, policiesAndLimits))
	sync := newObjectSync(t, v1alpha1.ObjectSyncSpec{Source: policySource(srcNS, src.Name), DestinationNamespace: dst})
	replica := waitForPolicyReplicas(t, sync, src.Spec, dst)[dst]
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "1/1")

	egress := []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(53))}}}}
	update(t, replica, func(np *networkingv1.NetworkPolicy) { np.Spec.Egress = egress })
	consistently(t, 4*time.Second, "their field left alone", func() error {
		if n := running.WritesIn(http.MethodPut, dst) + running.WritesIn(http.MethodPatch, dst); n != 0 {
			return fmt.Errorf("%d writes to the replica; last writes:\n%s", n, running.LastWrites())
		}
		return nil
	})

	update(t, src, func(np *networkingv1.NetworkPolicy) {
		np.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	})
	eventually(t, timeout, "the source's change written, their field kept", func() error {
		now := policyReplicas(t, sync)[dst]
		if now == nil || now.Spec.PodSelector.MatchLabels["app"] != "web" {
			return fmt.Errorf("replica %+v", now)
		}
		if len(now.Spec.Egress) != 1 || now.Spec.Egress[0].Ports[0].Port.IntValue() != 53 {
			return fmt.Errorf("their egress rules: %+v", now.Spec.Egress)
		}
		return nil
	})
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "1/1")
}

// limitRange creates a LimitRange whose container limits the API server completes: the
// default limit and request it fills in from the maximum.
func limitRange(t *testing.T, namespace string) *corev1.LimitRange {
	t.Helper()
	limits := &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "container-limits"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		}}},
	}
	must(t, k8s.Create(context.Background(), limits))
	if limits.Spec.Limits[0].Default == nil || limits.Spec.Limits[0].DefaultRequest == nil {
		t.Fatalf("the API server defaulted nothing: %+v", limits.Spec)
	}
	return limits
}

// waitForLimitRanges waits until the LimitRange named name in each namespace is a
// replica of sync with spec.
func waitForLimitRanges(t *testing.T, sync *v1alpha1.ObjectSync, name string, spec corev1.LimitRangeSpec, namespaces ...string) {
	t.Helper()
	eventually(t, timeout, "the LimitRange replicas", func() error {
		for _, ns := range namespaces {
			replica := &corev1.LimitRange{}
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, replica); err != nil {
				return err
			}
			if ref := metav1.GetControllerOf(replica); ref == nil || ref.UID != sync.UID {
				return fmt.Errorf("the LimitRange in %s is not %s's: owners %v", ns, sync.Name, replica.OwnerReferences)
			}
			if !equality.Semantic.DeepEqual(replica.Spec, spec) {
				return fmt.Errorf("the replica in %s has spec %+v, want %+v", ns, replica.Spec, spec)
			}
		}
		return nil
	})
}

// A LimitRange, whose defaults the API server fills in, fans out with them and is left
// alone: idle and after a restart cmsync writes nothing. An edited replica is restored,
// and the replicas follow the source's change.
func TestObjectSyncOfALimitRange(t *testing.T) {
	srcNS := newNamespace(t, "src", nil)
	group, targets := newGroup(t, "olimit", 2)
	src := limitRange(t, srcNS)
	running := startController(t, withObjectKinds(t, policiesAndLimits))
	sync := newObjectSync(t, v1alpha1.ObjectSyncSpec{
		Source:            v1alpha1.ObjectSource{APIVersion: "v1", Kind: "LimitRange", Namespace: srcNS, Name: src.Name},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"group": group}},
	})
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "2/2")
	waitForLimitRanges(t, sync, src.Name, src.Spec, targets...)
	assertIdle(t, running, 4*time.Second, sync)

	running.Stop()
	restarted := startController(t, withObjectKinds(t, policiesAndLimits))
	assertWritesNothing(t, restarted, 6*time.Second, sync)

	// Drift: a replica's maximum raised is put back.
	update(t, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: targets[0], Name: src.Name}}, func(lr *corev1.LimitRange) {
		lr.Spec.Limits[0].Max[corev1.ResourceCPU] = resource.MustParse("4")
	})
	waitForLimitRanges(t, sync, src.Name, src.Spec, targets...)

	// The source changes: a limit for the Pod as a whole is added.
	update(t, src, func(lr *corev1.LimitRange) {
		lr.Spec.Limits = append(lr.Spec.Limits, corev1.LimitRangeItem{
			Type: corev1.LimitTypePod, Max: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		})
	})
	waitForLimitRanges(t, sync, src.Name, src.Spec, targets...)
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "2/2")
	assertIdle(t, restarted, 3*time.Second, sync)
}

// An ObjectSync deleted while cmsync is down loses its replicas at the next start, and
// nothing else is touched: not the source, not an object of the same name cmsync did
// not create in one of its target namespaces, not another ObjectSync of the same
// source or its replica.
func TestObjectSyncDeletedWhileCmsyncIsDownTakesOnlyItsReplicas(t *testing.T) {
	srcNS, mine, taken, other := newNamespace(t, "src", nil), newNamespace(t, "dst", nil), newNamespace(t, "dst", nil), newNamespace(t, "dst", nil)
	src := defaultDenyPolicy(t, srcNS)
	theirs := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: src.Name}}
	must(t, k8s.Create(context.Background(), theirs))
	running := startController(t, withObjectKinds(t, policiesAndLimits))
	doomed := newObjectSync(t, v1alpha1.ObjectSyncSpec{Source: policySource(srcNS, src.Name), DestinationNamespaces: []string{mine, taken}})
	kept := newObjectSync(t, v1alpha1.ObjectSyncSpec{Source: policySource(srcNS, src.Name), DestinationNamespace: other})
	waitForReadyCount(t, doomed, metav1.ConditionFalse, v1alpha1.ReasonDegraded, "1/2")
	waitForPolicyReplicas(t, doomed, src.Spec, mine)
	keptReplica := waitForPolicyReplicas(t, kept, src.Spec, other)[other]
	waitForReadyCount(t, kept, metav1.ConditionTrue, v1alpha1.ReasonSynced, "1/1")
	settled(t, running, doomed, kept)
	versions := map[client.Object]string{}
	for _, obj := range []client.Object{src, theirs, keptReplica, kept} {
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
		versions[obj] = obj.GetResourceVersion()
	}

	running.Stop()
	must(t, k8s.Delete(context.Background(), doomed))
	restarted := startController(t, withObjectKinds(t, policiesAndLimits))
	eventually(t, timeout, "the deleted ObjectSync and its replica gone", func() error {
		if left := policyReplicas(t, doomed); len(left) != 0 {
			return fmt.Errorf("replicas left in %d namespaces", len(left))
		}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(doomed), &v1alpha1.ObjectSync{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the ObjectSync: %v", err)
		}
		return nil
	})
	consistently(t, 3*time.Second, "nothing else touched", func() error {
		for obj, version := range versions {
			now := newLike(obj)
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), now); err != nil {
				return fmt.Errorf("%s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
			}
			if now.GetResourceVersion() != version {
				return fmt.Errorf("%s/%s was written", obj.GetNamespace(), obj.GetName())
			}
		}
		return nil
	})
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if n := restarted.WritesIn(method, srcNS, taken, other); n != 0 {
			t.Errorf("%d %s requests outside the deleted ObjectSync's replicas; last writes:\n%s", n, method, restarted.LastWrites())
		}
	}
	if n := restarted.WritesIn(http.MethodDelete, mine); n != 1 {
		t.Errorf("%d deletes in %s, want its one replica's", n, mine)
	}
}

// cmsync's own namespace never holds an ObjectSync's replica: one written there before
// (by a controller that did not know its namespace, or before an upgrade) is deleted
// once the controller knows it — also while the ObjectSync cannot be acted on, when
// the replicas elsewhere are kept — and no new one is written.
func TestObjectSyncKeepsNoReplicaInTheControllersNamespace(t *testing.T) {
	srcNS, team, own := newNamespace(t, "src", nil), newNamespace(t, "dst", nil), newNamespace(t, "cmsync", nil)
	src := defaultDenyPolicy(t, srcNS)
	running := startController(t, withObjectKinds(t, policiesAndLimits))
	sync := newObjectSync(t, v1alpha1.ObjectSyncSpec{Source: policySource(srcNS, src.Name), DestinationNamespaces: []string{team, own}})
	waitForPolicyReplicas(t, sync, src.Spec, team, own)
	running.Stop()

	// The source is gone: the ObjectSync cannot be acted on, and keeps its replicas
	// where they may stay.
	must(t, k8s.Delete(context.Background(), src))
	guarded := defaultPolicy()
	guarded.ControllerNamespace = own
	restarted := startController(t, withObjectKinds(t, policiesAndLimits), withPolicy(guarded))
	waitForReadyCount(t, sync, metav1.ConditionFalse, v1alpha1.ReasonSourceNotFound, "")
	waitForPolicyReplicas(t, sync, src.Spec, team)

	// The source is back: the replica goes to the team's namespace alone.
	src = defaultDenyPolicy(t, srcNS)
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "1/1")
	consistently(t, 2*time.Second, "no replica in "+own, func() error {
		if n := restarted.WritesIn(http.MethodPost, own); n > 0 {
			return fmt.Errorf("%d creates in %s", n, own)
		}
		return nil
	})
	waitForPolicyReplicas(t, sync, src.Spec, team)
}
