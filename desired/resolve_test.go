package desired

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

func sourceConfigMap(namespace, name string, annotations map[string]string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   namespace,
			Name:        name,
			Labels:      map[string]string{v1alpha1.ReplicateLabel: "true", "secret-owner": "x", "keep": "y"},
			Annotations: annotations,
		},
		Data: data,
	}
}

// addLabels gives obj n labels named prefix<i>, of 64 bytes each with their values.
func addLabels(obj metav1.Object, prefix string, n int) {
	labels := obj.GetLabels()
	for i := range n {
		key := fmt.Sprintf("%s%06d", prefix, i)
		labels[key] = strings.Repeat("v", 64-len(key))
	}
	obj.SetLabels(labels)
}

// Resolve is the one decision about a source: the annotation form and the
// ConfigMapSync form, every reason a source is Invalid, and what a source read whole
// adds (the kind's check and the byte budget).
func TestResolve(t *testing.T) {
	namespaces := []Namespace{tenantNS("platform", ""), tenantNS("team-a", "a"), tenantNS("team-b", "b"), tenantNS("team-c", "a")}
	policy := Policy{SourceNamespaces: []string{"*"}, MaxReplicatedBytes: 1000, ReservedNames: []string{"istio-ca-root-cert"}, TenantLabel: tenantLabel}
	tests := []struct {
		name        string
		source      func() (Kind[*corev1.ConfigMap], Source[*corev1.ConfigMap])
		wantTargets []string
		wantName    string
		wantInvalid []string // fragments, every one present
	}{
		{
			name: "annotated, bound by its tenant",
			source: func() (Kind[*corev1.ConfigMap], Source[*corev1.ConfigMap]) {
				return ConfigMapKind{}, AnnotatedSource(
					sourceConfigMap("team-a", "app", map[string]string{v1alpha1.TargetNamespacesAnnotation: "team-*"}, map[string]string{"k": "v"}),
				)
			},
			wantTargets: []string{"team-c"}, wantName: "app",
		},
		{
			name: "every malformed annotation named at once",
			source: func() (Kind[*corev1.ConfigMap], Source[*corev1.ConfigMap]) {
				return ConfigMapKind{}, AnnotatedSource(sourceConfigMap("platform", "app",
					map[string]string{v1alpha1.TargetNamespacesAnnotation: "team-[a", v1alpha1.KeysAnnotation: "a/b"}, nil))
			},
			wantInvalid: []string{"invalid target-namespaces", "invalid keys"},
		},
		{
			name: "target-name reserved",
			source: func() (Kind[*corev1.ConfigMap], Source[*corev1.ConfigMap]) {
				return ConfigMapKind{}, AnnotatedSource(sourceConfigMap("platform", "app",
					map[string]string{v1alpha1.TargetNamespacesAnnotation: "*", v1alpha1.TargetNameAnnotation: "istio-ca-root-cert"}, nil))
			},
			wantInvalid: []string{"istio-ca-root-cert, a reserved name"},
		},
		{
			name: "named like the cluster's CA",
			source: func() (Kind[*corev1.ConfigMap], Source[*corev1.ConfigMap]) {
				return ConfigMapKind{}, AnnotatedSource(
					sourceConfigMap("platform", "kube-root-ca.crt", map[string]string{v1alpha1.TargetNamespacesAnnotation: "*"}, nil),
				)
			},
			wantInvalid: []string{"kube-root-ca.crt, a reserved name"},
		},
		{
			name: "over the byte budget",
			source: func() (Kind[*corev1.ConfigMap], Source[*corev1.ConfigMap]) {
				return ConfigMapKind{}, AnnotatedSource(sourceConfigMap("platform", "big", map[string]string{v1alpha1.TargetNamespacesAnnotation: "team-*"},
					map[string]string{"k": strings.Repeat("x", 400)}))
			},
			wantInvalid: []string{"over the controller's --max-replicated-bytes"},
		},
		{
			name: "labels over what a replica may carry",
			source: func() (Kind[*corev1.ConfigMap], Source[*corev1.ConfigMap]) {
				cm := sourceConfigMap("platform", "labelled", map[string]string{v1alpha1.TargetNamespacesAnnotation: "team-*"}, nil)
				addLabels(cm, "bulk-", MaxReplicaMetadataBytes/64+1)
				return ConfigMapKind{}, AnnotatedSource(cm)
			},
			wantInvalid: []string{
				"labels and annotations a replica would carry take 64.",
				"over cmsync's limit of 64Ki per replica",
				"cmsync.io/strip-metadata",
			},
		},
		{
			name: "labels kept out of the copies by strip-metadata",
			source: func() (Kind[*corev1.ConfigMap], Source[*corev1.ConfigMap]) {
				cm := sourceConfigMap(
					"platform",
					"labelled",
					map[string]string{v1alpha1.TargetNamespacesAnnotation: "team-*", v1alpha1.StripMetadataAnnotation: "bulk-*"},
					nil,
				)
				addLabels(cm, "bulk-", MaxReplicaMetadataBytes/64+1)
				return ConfigMapKind{}, AnnotatedSource(cm)
			},
			wantTargets: []string{"team-a", "team-b", "team-c"}, wantName: "labelled",
		},
		{
			name: "a replica is no source",
			source: func() (Kind[*corev1.ConfigMap], Source[*corev1.ConfigMap]) {
				cm := sourceConfigMap(
					"team-a",
					"app",
					map[string]string{v1alpha1.SourceAnnotation: "platform/app", v1alpha1.TargetNamespacesAnnotation: "*"},
					nil,
				)
				cm.Labels[v1alpha1.ManagedByLabel] = v1alpha1.ManagedByValue
				return ConfigMapKind{}, AnnotatedSource(cm)
			},
			wantInvalid: []string{"is a replica of platform/app"},
		},
		{
			name: "a ConfigMapSync is not bound, and its source's strip-metadata applies",
			source: func() (Kind[*corev1.ConfigMap], Source[*corev1.ConfigMap]) {
				src := sourceConfigMap("team-a", "app", map[string]string{v1alpha1.StripMetadataAnnotation: "secret-*"}, map[string]string{"k": "v"})
				sync := &v1alpha1.ConfigMapSync{
					ObjectMeta: metav1.ObjectMeta{Name: "s"},
					Spec: v1alpha1.ConfigMapSyncSpec{
						SourceNamespace: "team-a",
						ConfigMapName:   "app",
						ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespaces: []string{"team-*"}, TargetName: "shared"},
					},
				}
				return ConfigMapKind{}, Source[*corev1.ConfigMap]{
					Key:    types.NamespacedName{Namespace: "team-a", Name: "app"},
					Meta:   src,
					Object: src,
					Whole:  true,
					Sync:   sync,
				}
			},
			wantTargets: []string{"team-b", "team-c"}, wantName: "shared",
		},
		{
			name: "a ConfigMapSync: every problem of its spec and of the policy named at once",
			source: func() (Kind[*corev1.ConfigMap], Source[*corev1.ConfigMap]) {
				sync := &v1alpha1.ConfigMapSync{
					ObjectMeta: metav1.ObjectMeta{Name: "s"},
					Spec: v1alpha1.ConfigMapSyncSpec{
						SourceNamespace: "team-a",
						ConfigMapName:   "app",
						ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespaces: []string{"team-[a"}, TargetName: "kube-root-ca.crt"},
					},
				}
				return ConfigMapKind{}, Source[*corev1.ConfigMap]{Key: types.NamespacedName{Namespace: "team-a", Name: "app"}, Sync: sync}
			},
			wantInvalid: []string{"spec.destinationNamespaces[0]", "kube-root-ca.crt, a reserved name"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, src := tt.source()
			intent := Resolve(kind, src, namespaces, policy)
			if len(tt.wantInvalid) > 0 {
				if intent.Invalid == nil {
					t.Fatalf("valid, want Invalid with %q", tt.wantInvalid)
				}
				for _, fragment := range tt.wantInvalid {
					if !strings.Contains(intent.Invalid.Error(), fragment) {
						t.Errorf("Invalid %q lacks %q", intent.Invalid, fragment)
					}
				}
				return
			}
			if intent.Invalid != nil {
				t.Fatalf("Invalid: %v", intent.Invalid)
			}
			if !reflect.DeepEqual(intent.Targets.Namespaces, tt.wantTargets) || intent.ReplicaName != tt.wantName || intent.Template.Name() != tt.wantName {
				t.Errorf(
					"targets %v, name %q (template %q); want %v, %q",
					intent.Targets.Namespaces,
					intent.ReplicaName,
					intent.Template.Name(),
					tt.wantTargets,
					tt.wantName,
				)
			}
			replica := intent.Template.In("team-c")
			if src.Sync != nil {
				if _, ok := replica.Labels["secret-owner"]; ok || replica.Labels["keep"] != "y" {
					t.Errorf("the source's strip-metadata not applied to a ConfigMapSync's replica: %v", replica.Labels)
				}
			}
		})
	}
}

// A Secret of type service-account-token is refused once read whole; from its metadata
// alone it cannot be told, and the intent is not marked Invalid for it.
func TestResolveChecksTheKindOnlyWhenReadWhole(t *testing.T) {
	token := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "token", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: "*"}},
		Type: corev1.SecretTypeServiceAccountToken,
	}
	policy := Policy{SourceNamespaces: []string{"*"}}
	if intent := Resolve(
		SecretKind{},
		AnnotatedSource(token),
		[]Namespace{{Name: "team-a"}},
		policy,
	); intent.Invalid == nil ||
		!strings.Contains(intent.Invalid.Error(), "token") {
		t.Errorf("read whole: Invalid %v", intent.Invalid)
	}
	metaOnly := Source[*corev1.Secret]{Key: types.NamespacedName{Namespace: "platform", Name: "token"}, Meta: token}
	if intent := Resolve(SecretKind{}, metaOnly, []Namespace{{Name: "team-a"}}, policy); intent.Invalid != nil || len(intent.Targets.Namespaces) != 1 {
		t.Errorf("metadata only: %+v", intent)
	}
}

// The bound on a replica's metadata is decided from the source's metadata alone, as
// from the source read whole: at every size around the bound, with and without the
// labels stripped, of the annotation form and of a ConfigMapSync (whose source's
// strip-metadata applies), a reader of metadata (kubectl cmsync) and the controller agree.
func TestReplicaMetadataBoundNeedsOnlyMetadata(t *testing.T) {
	policy := Policy{SourceNamespaces: []string{"*"}}
	namespaces := []Namespace{{Name: "team-a"}}
	key := types.NamespacedName{Namespace: "platform", Name: "labelled"}
	sync := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: v1alpha1.ConfigMapSyncSpec{
		SourceNamespace: key.Namespace, ConfigMapName: key.Name, ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: "team-a"}}}
	for _, explicit := range []v1alpha1.Sync{nil, sync} {
		resolve := func(cm *corev1.ConfigMap, whole bool) Intent[*corev1.ConfigMap] {
			src := Source[*corev1.ConfigMap]{Key: key, Meta: cm, Sync: explicit}
			if whole {
				src.Object, src.Whole = cm, true
			}
			return Resolve(ConfigMapKind{}, src, namespaces, policy)
		}
		for _, strip := range []string{"", "bulk-*"} {
			for extra := -3; extra <= 3; extra++ {
				annotations := map[string]string{v1alpha1.TargetNamespacesAnnotation: "team-a"}
				if strip != "" {
					annotations[v1alpha1.StripMetadataAnnotation] = strip
				}
				cm := sourceConfigMap(key.Namespace, key.Name, annotations, map[string]string{"k": "v"})
				addLabels(cm, "bulk-", MaxReplicaMetadataBytes/64-16)
				// Padded to extra bytes over the bound, counting the replica's own markers.
				cm.Annotations["pad"] = ""
				unpadded := resolve(cm, true)
				if unpadded.Invalid != nil {
					t.Fatalf("sync %v, strip %q: the unpadded source is Invalid: %v", explicit != nil, strip, unpadded.Invalid)
				}
				n := metadataBytes(unpadded.Template.labels, unpadded.Template.annotations)
				cm.Annotations["pad"] = strings.Repeat("p", int(MaxReplicaMetadataBytes-n)+extra)
				whole, metaOnly := resolve(cm, true), resolve(cm, false)
				if fmt.Sprint(whole.Invalid) != fmt.Sprint(metaOnly.Invalid) || (whole.Invalid != nil) != (extra > 0) {
					t.Errorf("sync %v, strip %q, %+d bytes: read whole %v; from metadata %v", explicit != nil, strip, extra, whole.Invalid, metaOnly.Invalid)
				}
			}
		}
	}
}

// An ObjectSync never writes into the controller's own namespace, whatever its
// destinations say (a RoleBinding there would reach cmsync's rights); a ConfigMapSync
// may, and explain says why the namespace is left out.
func TestObjectSyncKeepsOutOfTheControllersNamespace(t *testing.T) {
	namespaces := []Namespace{{Name: "platform"}, {Name: "cmsync-system"}, {Name: "team-a"}}
	policy := Policy{SourceNamespaces: []string{"*"}, ControllerNamespace: "cmsync-system"}
	replicas := v1alpha1.ReplicaSpec{DestinationNamespaces: []string{"*"}, DestinationNamespace: "cmsync-system"}
	osync := &v1alpha1.ObjectSync{
		ObjectMeta: metav1.ObjectMeta{Name: "default-deny"},
		Spec: v1alpha1.ObjectSyncSpec{
			Source: v1alpha1.ObjectSource{
				APIVersion: "networking.k8s.io/v1",
				Kind:       "NetworkPolicy",
				Namespace:  "platform",
				Name:       "default-deny",
			},
			DestinationNamespaces: replicas.DestinationNamespaces,
			DestinationNamespace:  replicas.DestinationNamespace,
		},
	}
	kind := NewObjectKind(defaultDeny().GroupVersionKind())
	intent := Resolve(
		kind,
		Source[*unstructured.Unstructured]{Key: types.NamespacedName{Namespace: "platform", Name: "default-deny"}, Sync: osync},
		namespaces,
		policy,
	)
	if intent.Invalid != nil || !reflect.DeepEqual(intent.Targets.Namespaces, []string{"team-a"}) {
		t.Fatalf("ObjectSync: targets %v, Invalid %v; want [team-a]", intent.Targets.Namespaces, intent.Invalid)
	}
	if got := AdmittingNamespaces(intent.Origin, namespaces, policy); !reflect.DeepEqual(got, []string{"team-a"}) {
		t.Errorf("an Invalid ObjectSync would keep replicas in %v; want [team-a]", got)
	}
	verdict := ExplainTarget(intent.Spec, intent.Origin, namespaces[1], policy)
	if verdict.Wanted || !strings.Contains(verdict.Rule, "cmsync's own namespace") {
		t.Errorf("explain of cmsync-system: %+v", verdict)
	}

	cmsync := &v1alpha1.ConfigMapSync{
		ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec:       v1alpha1.ConfigMapSyncSpec{SourceNamespace: "platform", ConfigMapName: "app", ReplicaSpec: replicas},
	}
	cmIntent := Resolve(
		ConfigMapKind{},
		Source[*corev1.ConfigMap]{Key: types.NamespacedName{Namespace: "platform", Name: "app"}, Sync: cmsync},
		namespaces,
		policy,
	)
	if !reflect.DeepEqual(cmIntent.Targets.Namespaces, []string{"cmsync-system", "team-a"}) {
		t.Errorf("ConfigMapSync: targets %v; want [cmsync-system team-a]", cmIntent.Targets.Namespaces)
	}
}
