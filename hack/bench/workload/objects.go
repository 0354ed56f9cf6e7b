package workload

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// SourceNamespace holds the bench's sources.
const SourceNamespace = "bench-src"

// managedByCmsync selects cmsync's replicas.
const managedByCmsync = v1alpha1.ManagedByLabel + "=" + v1alpha1.ManagedByValue

// Object is a ConfigMap's or a Secret's metadata and string data.
type Object struct {
	metav1.ObjectMeta
	Data map[string]string
}

// Kind writes and reads the bench's objects of one kind through the typed client.
type Kind interface {
	// Resource names the kind's resource as the audit log does.
	Resource() string
	// GroupVersion is the kind's API group and version.
	GroupVersion() schema.GroupVersion
	Create(ctx context.Context, o Object) error
	Update(ctx context.Context, o Object) error
	Delete(ctx context.Context, namespace, name string) error
	// ManagedValues returns the "v" of every object labelled as cmsync's, by namespace
	// and name.
	ManagedValues(ctx context.Context) (map[string]string, error)
}

// ConfigMaps writes the objects as ConfigMaps.
type ConfigMaps struct{ Clientset *kubernetes.Clientset }

func (ConfigMaps) Resource() string { return "configmaps" }

func (ConfigMaps) GroupVersion() schema.GroupVersion { return corev1.SchemeGroupVersion }

func (k ConfigMaps) Create(ctx context.Context, o Object) error {
	_, err := k.Clientset.CoreV1().ConfigMaps(o.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: o.ObjectMeta, Data: o.Data}, metav1.CreateOptions{})
	return err
}

func (k ConfigMaps) Update(ctx context.Context, o Object) error {
	_, err := k.Clientset.CoreV1().ConfigMaps(o.Namespace).Update(ctx, &corev1.ConfigMap{ObjectMeta: o.ObjectMeta, Data: o.Data}, metav1.UpdateOptions{})
	return err
}

func (k ConfigMaps) Delete(ctx context.Context, namespace, name string) error {
	return k.Clientset.CoreV1().ConfigMaps(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

func (k ConfigMaps) ManagedValues(ctx context.Context) (map[string]string, error) {
	list, err := k.Clientset.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: managedByCmsync})
	if err != nil {
		return nil, err
	}
	values := make(map[string]string, len(list.Items))
	for _, cm := range list.Items {
		values[cm.Namespace+"/"+cm.Name] = cm.Data["v"]
	}
	return values, nil
}

// Secrets writes Opaque Secrets; their values go as stringData, as a user's would.
type Secrets struct{ Clientset *kubernetes.Clientset }

func (Secrets) Resource() string { return "secrets" }

func (Secrets) GroupVersion() schema.GroupVersion { return corev1.SchemeGroupVersion }

func (k Secrets) secret(o Object) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: o.ObjectMeta, Type: corev1.SecretTypeOpaque, StringData: o.Data}
}

func (k Secrets) Create(ctx context.Context, o Object) error {
	_, err := k.Clientset.CoreV1().Secrets(o.Namespace).Create(ctx, k.secret(o), metav1.CreateOptions{})
	return err
}

func (k Secrets) Update(ctx context.Context, o Object) error {
	_, err := k.Clientset.CoreV1().Secrets(o.Namespace).Update(ctx, k.secret(o), metav1.UpdateOptions{})
	return err
}

func (k Secrets) Delete(ctx context.Context, namespace, name string) error {
	return k.Clientset.CoreV1().Secrets(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

func (k Secrets) ManagedValues(ctx context.Context) (map[string]string, error) {
	list, err := k.Clientset.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: managedByCmsync})
	if err != nil {
		return nil, err
	}
	values := make(map[string]string, len(list.Items))
	for _, s := range list.Items {
		values[s.Namespace+"/"+s.Name] = string(s.Data["v"])
	}
	return values, nil
}

// limitManagedByLabel is the first label of LIMIT's objects.
const limitManagedByLabel = "bench.limit/managed-by"

// ReplicaShaped is an object of a replica's shape under the bench's own keys: the
// data keys of a bench source, and as many labels and annotations of the same sizes,
// the third label changing with v as a replica's content-hash label changes with its
// content. managedBy is its first label's value; payload is its second data key's.
func ReplicaShaped(namespace, name, managedBy, v, payload string) Object {
	return Object{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels: map[string]string{
				limitManagedByLabel: managedBy, "bench.limit/source-id": strings.Repeat("0", 40),
				"bench.limit/content-hash": strings.Repeat(v, 40),
			},
			Annotations: map[string]string{"bench.limit/source": SourceNamespace + "/" + name}},
		Data: map[string]string{"v": v, "payload": payload},
	}
}

// Source is the bench's source name, replicated to every bench namespace, its value
// "v" 1 and its payload as given.
func Source(name, payload string) Object {
	return Object{ObjectMeta: metav1.ObjectMeta{Namespace: SourceNamespace, Name: name,
		Labels:      map[string]string{"cmsync.io/replicate": "true"},
		Annotations: map[string]string{"cmsync.io/target-namespaces": "bench-[0-9]*"}},
		Data: map[string]string{"v": "1", "payload": payload}}
}
