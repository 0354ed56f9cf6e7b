package integration

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// A certificate and key as a kubernetes.io/tls Secret holds them (the API server only
// checks that both keys are there).
var (
	tlsCert = []byte("-----BEGIN CERTIFICATE-----\nMIIB-first-issue\n-----END CERTIFICATE-----\n")
	tlsKey  = []byte("-----BEGIN EC PRIVATE KEY-----\nMHcC-first-key\n-----END EC PRIVATE KEY-----\n")
)

func newSecretSource(t *testing.T, namespace, name string, typ corev1.SecretType, annotations map[string]string, data map[string][]byte) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name,
			Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: annotations,
		},
		Type: typ,
		Data: data,
	}
	must(t, k8s.Create(context.Background(), s))
	return s
}

func getSecret(namespace, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	return s, k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s)
}

// secretReplicas returns the replicas of src by namespace.
func secretReplicas(t *testing.T, src *corev1.Secret) map[string]*corev1.Secret {
	t.Helper()
	var list corev1.SecretList
	must(t, k8s.List(context.Background(), &list, client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}))
	out := map[string]*corev1.Secret{}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Annotations[v1alpha1.SourceAnnotation] == src.Namespace+"/"+src.Name {
			out[s.Namespace] = s
		}
	}
	return out
}

// waitForSecretReplicas waits until src has replicas in exactly the namespaces want,
// each of src's type and with data.
func waitForSecretReplicas(t *testing.T, src *corev1.Secret, data map[string][]byte, want ...string) {
	t.Helper()
	eventually(t, timeout, "replicas of Secret "+src.Name, func() error {
		replicas := secretReplicas(t, src)
		var got []string
		for ns, r := range replicas {
			got = append(got, ns)
			if r.Name != src.Name || r.Type != src.Type || !sameData(r.Data, data) {
				return fmt.Errorf("replica in %s: name %s type %s keys %v", ns, r.Name, r.Type, slices.Sorted(mapsKeys(r.Data)))
			}
		}
		if !sameSet(got, want) {
			return fmt.Errorf("replicas in %v, want %v", got, want)
		}
		return nil
	})
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// A kubernetes.io/tls and a kubernetes.io/dockerconfigjson Secret fan out with their
// type; a renewal reaches every replica; an edited and a deleted replica are restored;
// the source reports like a ConfigMap does.
func TestSecretsFanOutRenewAndRepair(t *testing.T) {
	running := startController(t, withSecrets())
	srcNS := newNamespace(t, "sec-src", nil)
	group := srcNS // unique per test
	a, b := newNamespace(t, "sec-dst", map[string]string{"group": group}), newNamespace(t, "sec-dst", map[string]string{"group": group})
	targets := map[string]string{v1alpha1.TargetSelectorAnnotation: "group=" + group}
	tlsData := map[string][]byte{corev1.TLSCertKey: tlsCert, corev1.TLSPrivateKeyKey: tlsKey}
	cert := newSecretSource(t, srcNS, "wildcard-tls", corev1.SecretTypeTLS, targets, tlsData)
	pullData := map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example":{"auth":"dXNlcjpwYXNz"}}}`)}
	pull := newSecretSource(t, srcNS, "registry-credentials", corev1.SecretTypeDockerConfigJson, targets, pullData)

	waitForSecretReplicas(t, cert, tlsData, a, b)
	waitForSecretReplicas(t, pull, pullData, a, b)
	waitForSourceStatus(t, cert, v1alpha1.StatusSynced, "2/2")
	waitForEvent(t, cert, v1alpha1.ReasonSynced, "in sync in 2 namespaces")

	// A renewal: cert-manager writes a new certificate and key into the same Secret.
	renewed := map[string][]byte{
		corev1.TLSCertKey:       []byte("-----BEGIN CERTIFICATE-----\nMIIB-renewed\n-----END CERTIFICATE-----\n"),
		corev1.TLSPrivateKeyKey: tlsKey,
	}
	update(t, cert, func(s *corev1.Secret) { s.Data = renewed })
	waitForSecretReplicas(t, cert, renewed, a, b)

	// Someone edits one replica and deletes the other: both are restored.
	replica, err := getSecret(a, cert.Name)
	must(t, err)
	update(t, replica, func(s *corev1.Secret) { s.Data[corev1.TLSCertKey] = []byte("tampered") })
	must(t, k8s.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: cert.Name}}))
	waitForSecretReplicas(t, cert, renewed, a, b)
	if metricValue := kindMetricValue(t, running.Metrics, "cmsync_sources", "Secret", ""); metricValue < 2 {
		t.Errorf("cmsync_sources{kind=Secret} = %v, want at least 2", metricValue)
	}
}

// Narrowing and deleting Secret sources delete exactly their replicas, also when the
// deletion happened while the controller was down.
func TestSecretsCleanupIsExactAcrossRestart(t *testing.T) {
	running := startController(t, withSecrets())
	srcNS := newNamespace(t, "sec-src", nil)
	a, b := newNamespace(t, "sec-dst", nil), newNamespace(t, "sec-dst", nil)
	data := map[string][]byte{"token": []byte("s3cret")}
	narrowed := newSecretSource(t, srcNS, "narrowed", corev1.SecretTypeOpaque, map[string]string{v1alpha1.TargetNamespacesAnnotation: a + "," + b}, data)
	deleted := newSecretSource(t, srcNS, "deleted", corev1.SecretTypeOpaque, map[string]string{v1alpha1.TargetNamespacesAnnotation: a + "," + b}, data)
	waitForSecretReplicas(t, narrowed, data, a, b)
	waitForSecretReplicas(t, deleted, data, a, b)

	update(t, narrowed, func(s *corev1.Secret) { s.Annotations[v1alpha1.TargetNamespacesAnnotation] = a })
	waitForSecretReplicas(t, narrowed, data, a)

	running.Stop()
	must(t, k8s.Delete(context.Background(), deleted))
	startController(t, withSecrets())
	waitForSecretReplicas(t, deleted, data)
	waitForSecretReplicas(t, narrowed, data, a)
}

// An unmanaged Secret in the way is never touched and is reported; a ConfigMap and a
// Secret of the same name are independent sources with independent replicas.
func TestSecretConflictAndIndependenceFromConfigMaps(t *testing.T) {
	startController(t, withSecrets())
	srcNS := newNamespace(t, "sec-src", nil)
	free, taken := newNamespace(t, "sec-dst", nil), newNamespace(t, "sec-dst", nil)
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: "app"}, StringData: map[string]string{"theirs": "keep"}}
	must(t, k8s.Create(context.Background(), theirs))
	targets := map[string]string{v1alpha1.TargetNamespacesAnnotation: free + "," + taken}
	data := map[string][]byte{"password": []byte("p")}
	src := newSecretSource(t, srcNS, "app", corev1.SecretTypeOpaque, targets, data)
	cm := newSource(t, srcNS, "app", targets, map[string]string{"setting": "on"})

	degraded := waitForSourceStatus(t, src, v1alpha1.StatusDegraded, "1/2")
	if msg := degraded.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "conflict in "+taken+": a Secret not managed by cmsync exists") {
		t.Errorf("message %q", msg)
	}
	waitForEvent(t, src, v1alpha1.ReasonConflict, "a Secret not managed by cmsync exists")
	// The ConfigMap of the same name is not in the way of the Secret, nor the other way round.
	waitForReplicasIn(t, cm, free, taken)
	waitForSynced(t, cm, "2/2")
	consistently(t, 2*time.Second, "the unmanaged Secret is left alone", func() error {
		got, err := getSecret(taken, "app")
		if err != nil {
			return err
		}
		if got.ResourceVersion != theirs.ResourceVersion || string(got.Data["theirs"]) != "keep" || len(got.Data) != 1 {
			return fmt.Errorf("unmanaged Secret changed: rv %s data keys %d", got.ResourceVersion, len(got.Data))
		}
		return nil
	})
	// Deleting the Secret source removes its replica, not the ConfigMap's.
	must(t, k8s.Delete(context.Background(), src))
	waitForSecretReplicas(t, src, data)
	waitForReplicasIn(t, cm, free, taken)
}

// A service-account token never leaves its namespace: such a source is Invalid and
// nothing is created.
func TestServiceAccountTokenSourceIsInvalid(t *testing.T) {
	startController(t, withSecrets())
	srcNS := newNamespace(t, "sec-src", nil)
	dst := newNamespace(t, "sec-dst", nil)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "robot"}}
	must(t, k8s.Create(context.Background(), sa))
	token := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: srcNS, Name: "robot-token",
			Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "robot", v1alpha1.TargetNamespacesAnnotation: dst},
		},
		Type: corev1.SecretTypeServiceAccountToken,
	}
	must(t, k8s.Create(context.Background(), token))
	invalid := waitForSourceStatus(t, token, v1alpha1.StatusInvalid, "")
	if msg := invalid.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "a token must not leave its namespace") {
		t.Errorf("message %q", msg)
	}
	waitForEvent(t, token, v1alpha1.ReasonInvalid, string(corev1.SecretTypeServiceAccountToken))
	consistently(t, 2*time.Second, "no replica of the token", func() error {
		if _, err := getSecret(dst, token.Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("replica of a token: %v", err)
		}
		return nil
	})
}

// The type of a Secret cannot change in place, nor can the content of an immutable
// one: a source recreated with another type, or an immutable source with new content,
// gives recreated replicas.
func TestSecretTypeChangeAndImmutableRecreateReplicas(t *testing.T) {
	startController(t, withSecrets())
	srcNS := newNamespace(t, "sec-src", nil)
	dst := newNamespace(t, "sec-dst", nil)
	targets := map[string]string{v1alpha1.TargetNamespacesAnnotation: dst}
	opaque := map[string][]byte{corev1.TLSCertKey: tlsCert, corev1.TLSPrivateKeyKey: tlsKey}
	src := newSecretSource(t, srcNS, "cert", corev1.SecretTypeOpaque, targets, opaque)
	waitForSecretReplicas(t, src, opaque, dst)
	first, err := getSecret(dst, "cert")
	must(t, err)

	must(t, k8s.Delete(context.Background(), src))
	src = newSecretSource(t, srcNS, "cert", corev1.SecretTypeTLS, targets, opaque)
	waitForSecretReplicas(t, src, opaque, dst)
	second, err := getSecret(dst, "cert")
	must(t, err)
	if second.UID == first.UID || second.Type != corev1.SecretTypeTLS {
		t.Errorf("replica not recreated with the new type: uid %s -> %s, type %s", first.UID, second.UID, second.Type)
	}

	immutable := true
	update(t, src, func(s *corev1.Secret) { s.Immutable = &immutable })
	eventually(t, timeout, "replica immutable", func() error {
		r, err := getSecret(dst, "cert")
		if err != nil || r.Immutable == nil || !*r.Immutable {
			return fmt.Errorf("replica not immutable: %v", err)
		}
		return nil
	})
	must(t, k8s.Delete(context.Background(), src))
	renewed := map[string][]byte{corev1.TLSCertKey: []byte("renewed"), corev1.TLSPrivateKeyKey: tlsKey}
	src = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "cert", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"}, Annotations: targets},
		Type:       corev1.SecretTypeTLS, Data: renewed, Immutable: &immutable,
	}
	must(t, k8s.Create(context.Background(), src))
	waitForSecretReplicas(t, src, renewed, dst)
}

// With --secrets=disabled (the default) a labelled Secret is ignored, and cmsync makes
// no request about Secrets at all.
func TestSecretsDisabledMakesNoSecretRequest(t *testing.T) {
	running := startController(t)
	srcNS := newNamespace(t, "sec-src", nil)
	dst := newNamespace(t, "sec-dst", nil)
	src := newSecretSource(t, srcNS, "ignored", corev1.SecretTypeOpaque, map[string]string{v1alpha1.TargetNamespacesAnnotation: dst},
		map[string][]byte{"k": []byte("v")})
	cm := newSource(t, srcNS, "served", map[string]string{v1alpha1.TargetNamespacesAnnotation: dst}, map[string]string{"k": "v"})
	waitForReplicasIn(t, cm, dst)
	consistently(t, 2*time.Second, "the labelled Secret is ignored", func() error {
		got, err := getSecret(srcNS, src.Name)
		if err != nil {
			return err
		}
		if _, ok := got.Annotations[v1alpha1.StatusAnnotation]; ok {
			return fmt.Errorf("status written on a Secret: %v", got.Annotations)
		}
		if _, err := getSecret(dst, src.Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("replica of a Secret: %v", err)
		}
		return nil
	})
	if n := running.secretRequests.Load(); n != 0 {
		t.Errorf("%d requests about Secrets with --secrets=disabled", n)
	}
}
