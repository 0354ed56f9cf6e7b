//go:build e2e

package uninstall

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/test/harness"
)

// object is a ConfigMap or Secret the test made or expects, with the value of its one
// key.
type object struct {
	kind    client.Object // an empty ConfigMap or Secret: the kind
	key     client.ObjectKey
	content string
}

func (o object) kindName() string { return kindOf(o.kind) }

// copies are the sources a test made and the replicas cmsync made of them.
type copies struct{ sources, replicas []object }

// makeCopies makes a source of each form and kind — a labelled ConfigMap and Secret,
// a ConfigMapSync and a SecretSync — each copied into two namespaces, and waits until
// cmsync has made every copy and put its finalizer on the ConfigMapSync and SecretSync.
func makeCopies(t *testing.T) copies {
	t.Helper()
	ctx := context.Background()
	from := harness.NewNamespace(t, "from", nil)
	targets := []string{harness.NewNamespace(t, "to-a", nil), harness.NewNamespace(t, "to-b", nil)}
	labelled := metav1.ObjectMeta{Namespace: from, Name: "labelled",
		Labels:      map[string]string{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue},
		Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: strings.Join(targets, ",")}}
	named := metav1.ObjectMeta{Namespace: from, Name: "named"}
	replicaSpec := v1alpha1.ReplicaSpec{DestinationNamespaces: targets}
	var c copies
	for _, source := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: labelled, Data: map[string]string{"v": "labelled ConfigMap"}},
		&corev1.Secret{ObjectMeta: labelled, Data: map[string][]byte{"v": []byte("labelled Secret")}},
		&corev1.ConfigMap{ObjectMeta: named, Data: map[string]string{"v": "ConfigMapSync's ConfigMap"}},
		&corev1.Secret{ObjectMeta: named, Data: map[string][]byte{"v": []byte("SecretSync's Secret")}},
	} {
		must(t, harness.K8s.Create(ctx, source))
		s := object{kind: emptyOf(source), key: client.ObjectKeyFromObject(source), content: contentOf(source)}
		c.sources = append(c.sources, s)
		for _, ns := range targets {
			c.replicas = append(c.replicas, object{kind: s.kind, key: client.ObjectKey{Namespace: ns, Name: s.key.Name}, content: s.content})
		}
	}
	syncs := []client.Object{
		&v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: from},
			Spec: v1alpha1.ConfigMapSyncSpec{SourceNamespace: from, ConfigMapName: "named", ReplicaSpec: replicaSpec}},
		&v1alpha1.SecretSync{ObjectMeta: metav1.ObjectMeta{Name: from},
			Spec: v1alpha1.SecretSyncSpec{SourceNamespace: from, SecretName: "named", ReplicaSpec: replicaSpec}},
	}
	for _, sync := range syncs {
		must(t, harness.K8s.Create(ctx, sync))
	}
	waitForCopies(t, c, syncs)
	return c
}

// waitForCopies waits until cmsync has made every replica of c, put its finalizer on
// each of syncs and marked the labelled sources (the first two) Synced.
func waitForCopies(t *testing.T, c copies, syncs []client.Object) {
	t.Helper()
	ctx := context.Background()
	eventually(t, time.Minute, "every copy made, the explicit objects finalized", func() error {
		for _, r := range c.replicas {
			obj := emptyOf(r.kind)
			if err := harness.K8s.Get(ctx, r.key, obj); err != nil {
				return fmt.Errorf("%s %s: %w", r.kindName(), r.key, err)
			}
			if obj.GetLabels()[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue || contentOf(obj) != r.content {
				return fmt.Errorf("%s %s is not a replica yet", r.kindName(), r.key)
			}
		}
		for _, sync := range syncs {
			must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(sync), sync))
			if len(sync.GetFinalizers()) == 0 {
				return fmt.Errorf("%s has no finalizer yet", sync.GetName())
			}
		}
		for _, s := range c.sources[:2] {
			obj := emptyOf(s.kind)
			must(t, harness.K8s.Get(ctx, s.key, obj))
			if obj.GetAnnotations()[v1alpha1.StatusAnnotation] != v1alpha1.StatusSynced {
				return fmt.Errorf("%s %s: status %q", s.kindName(), s.key, obj.GetAnnotations()[v1alpha1.StatusAnnotation])
			}
		}
		return nil
	})
}

// configMapsAndSecrets lists every ConfigMap and Secret of the cluster.
func configMapsAndSecrets(t *testing.T) []client.Object {
	t.Helper()
	var cms corev1.ConfigMapList
	var secrets corev1.SecretList
	must(t, harness.K8s.List(context.Background(), &cms))
	must(t, harness.K8s.List(context.Background(), &secrets))
	all := make([]client.Object, 0, len(cms.Items)+len(secrets.Items))
	for i := range cms.Items {
		all = append(all, &cms.Items[i])
	}
	for i := range secrets.Items {
		all = append(all, &secrets.Items[i])
	}
	return all
}

// releaseObjects names every object of the release left in the cluster.
func releaseObjects(t *testing.T) []string {
	t.Helper()
	var left []string
	for _, list := range []client.ObjectList{
		&appsv1.DeploymentList{}, &corev1.ServiceAccountList{}, &corev1.ServiceList{},
		&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{},
		&admissionv1.ValidatingAdmissionPolicyList{}, &admissionv1.ValidatingAdmissionPolicyBindingList{},
	} {
		must(t, harness.K8s.List(context.Background(), list, client.MatchingLabels{"app.kubernetes.io/instance": harness.Release}))
		must(t, meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			left = append(left, fmt.Sprintf("%T %s/%s", obj, obj.GetNamespace(), obj.GetName()))
			return nil
		}))
	}
	return left
}

func emptyOf(obj client.Object) client.Object {
	if _, ok := obj.(*corev1.Secret); ok {
		return &corev1.Secret{}
	}
	return &corev1.ConfigMap{}
}

func kindOf(obj client.Object) string {
	if _, ok := obj.(*corev1.Secret); ok {
		return "Secret"
	}
	return "ConfigMap"
}

// contentOf is the value of the one key the test's objects hold.
func contentOf(obj client.Object) string {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return o.Data["v"]
	case *corev1.Secret:
		return string(o.Data["v"])
	}
	return ""
}
