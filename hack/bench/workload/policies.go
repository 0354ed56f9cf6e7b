package workload

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// PolicyKind is the kind the ObjectSync rounds copy, as --object-kinds names it.
const PolicyKind = "networking.k8s.io/v1/NetworkPolicy"

// policyValueLabel is the pod label a bench NetworkPolicy selects: its value is the
// object's "v", so that an update changes the policy's content as a source's does.
const policyValueLabel = "bench.cmsync.io/v"

// NetworkPolicies writes the objects as NetworkPolicies: a default-deny policy for
// ingress that admits one port, whose pod selector carries "v". The API server
// defaults its policyTypes and the port's protocol, as it does for a user's policy.
// The payload is not written: a NetworkPolicy has no field to hold it.
type NetworkPolicies struct{ Clientset *kubernetes.Clientset }

func (NetworkPolicies) Resource() string { return "networkpolicies" }

func (NetworkPolicies) GroupVersion() schema.GroupVersion { return networkingv1.SchemeGroupVersion }

// policy is o as a NetworkPolicy. LIMIT's objects (ReplicaShaped) also carry a
// controller owner reference, as an ObjectSync's replicas do (to their ObjectSync);
// the control plane runs no garbage collector to act on it.
func policy(o Object) *networkingv1.NetworkPolicy {
	meta := o.ObjectMeta
	if _, limits := meta.Labels[limitManagedByLabel]; limits {
		meta.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.ObjectSyncKind, Name: "limit",
			UID: "00000000-0000-0000-0000-000000000000", Controller: ptr.To(true),
		}}
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: meta,
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{policyValueLabel: o.Data["v"]}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(8443))}},
			}},
		},
	}
}

func (k NetworkPolicies) Create(ctx context.Context, o Object) error {
	_, err := k.Clientset.NetworkingV1().NetworkPolicies(o.Namespace).Create(ctx, policy(o), metav1.CreateOptions{})
	return err
}

func (k NetworkPolicies) Update(ctx context.Context, o Object) error {
	_, err := k.Clientset.NetworkingV1().NetworkPolicies(o.Namespace).Update(ctx, policy(o), metav1.UpdateOptions{})
	return err
}

func (k NetworkPolicies) Delete(ctx context.Context, namespace, name string) error {
	return k.Clientset.NetworkingV1().NetworkPolicies(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

func (k NetworkPolicies) ManagedValues(ctx context.Context) (map[string]string, error) {
	list, err := k.Clientset.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{LabelSelector: managedByCmsync})
	if err != nil {
		return nil, err
	}
	values := make(map[string]string, len(list.Items))
	for _, np := range list.Items {
		values[np.Namespace+"/"+np.Name] = np.Spec.PodSelector.MatchLabels[policyValueLabel]
	}
	return values, nil
}

// PolicySource is the bench's source NetworkPolicy name, "v" 1. It carries no
// cmsync label or annotation: an ObjectSync names it.
func PolicySource(name string) Object {
	return Object{ObjectMeta: metav1.ObjectMeta{Namespace: SourceNamespace, Name: name}, Data: map[string]string{"v": "1"}}
}

// ObjectSyncOf is the ObjectSync named name that copies the source NetworkPolicy of
// the same name into every bench namespace.
func ObjectSyncOf(name string) *v1alpha1.ObjectSync {
	return &v1alpha1.ObjectSync{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ObjectSyncSpec{
			Source: v1alpha1.ObjectSource{
				APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: SourceNamespace, Name: name,
			},
			DestinationNamespaces: []string{"bench-[0-9]*"},
		},
	}
}

// DeleteObjectSync deletes the ObjectSync named name; cmsync's finalizer holds it
// until its replicas are deleted.
func DeleteObjectSync(ctx context.Context, c client.Client, name string) error {
	return c.Delete(ctx, &v1alpha1.ObjectSync{ObjectMeta: metav1.ObjectMeta{Name: name}})
}
