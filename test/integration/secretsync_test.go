package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

func newSecretSync(t *testing.T, spec v1alpha1.SecretSyncSpec) *v1alpha1.SecretSync {
	t.Helper()
	sync := &v1alpha1.SecretSync{ObjectMeta: metav1.ObjectMeta{Name: "ssync-" + randomSuffix()}, Spec: spec}
	must(t, k8s.Create(context.Background(), sync))
	return sync
}

// plainSecret creates a Secret with no cmsync label, as an operator writes one.
func plainSecret(t *testing.T, namespace, name string, typ corev1.SecretType, data map[string][]byte) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Type: typ, Data: data}
	must(t, k8s.Create(context.Background(), s))
	return s
}

// secretSyncReplicas returns the Secrets a SecretSync owns, by namespace.
func secretSyncReplicas(t *testing.T, sync *v1alpha1.SecretSync) map[string]*corev1.Secret {
	t.Helper()
	var list corev1.SecretList
	must(t, k8s.List(context.Background(), &list, client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}))
	out := map[string]*corev1.Secret{}
	for i := range list.Items {
		for _, ref := range list.Items[i].OwnerReferences {
			if ref.Kind == v1alpha1.SecretSyncKind && ref.UID == sync.UID && ref.Controller != nil && *ref.Controller {
				out[list.Items[i].Namespace] = &list.Items[i]
			}
		}
	}
	return out
}

// waitForSecretSyncReplicas waits until the SecretSync has replicas named name in
// exactly the namespaces want, each of type typ with data.
func waitForSecretSyncReplicas(t *testing.T, sync *v1alpha1.SecretSync, name string, typ corev1.SecretType, data map[string][]byte, want ...string) {
	t.Helper()
	eventually(t, timeout, "replicas of "+sync.Name, func() error {
		var got []string
		for ns, r := range secretSyncReplicas(t, sync) {
			got = append(got, ns)
			if r.Name != name || r.Type != typ || !sameData(r.Data, data) {
				return fmt.Errorf("replica %s/%s: type %s, keys %v", ns, r.Name, r.Type, sortedKeys(r.Data))
			}
		}
		if !sameSet(got, want) {
			return fmt.Errorf("replicas in %v, want %v", got, want)
		}
		return nil
	})
}

func sortedKeys(m map[string][]byte) []string {
	var keys []string
	for k := range mapsKeys(m) {
		keys = append(keys, k)
	}
	return keys
}

// An unlabelled kubernetes.io/tls Secret fans out by names and globs, an unlabelled
// Opaque one by a namespace selector; both keep their type, the SecretSyncs report
// Ready with their counts and an Event, and cmsync never writes the sources.
func TestSecretSyncFansOutUnlabelledSecrets(t *testing.T) {
	startController(t, withSecrets())
	srcNS := newNamespace(t, "ssync-src", nil)
	named := newNamespace(t, "ssync-named", nil)
	base := namespaceSet(t, "a", "b")
	group, selected := newGroup(t, "ssync", 2)
	tls := plainSecret(t, srcNS, "wildcard-tls", corev1.SecretTypeTLS, map[string][]byte{corev1.TLSCertKey: tlsCert, corev1.TLSPrivateKeyKey: tlsKey})
	opaque := plainSecret(t, srcNS, "db-credentials", corev1.SecretTypeOpaque, map[string][]byte{"username": []byte("app"), "password": []byte("s3cret")})

	byName := newSecretSync(
		t,
		v1alpha1.SecretSyncSpec{
			SourceNamespace: srcNS,
			SecretName:      tls.Name,
			ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespace: named, DestinationNamespaces: []string{base + "-*", "!" + base + "-b"}},
		},
	)
	bySelector := newSecretSync(
		t,
		v1alpha1.SecretSyncSpec{
			SourceNamespace: srcNS,
			SecretName:      opaque.Name,
			ReplicaSpec:     v1alpha1.ReplicaSpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"group": group}}},
		},
	)

	waitForSecretSyncReplicas(t, byName, tls.Name, corev1.SecretTypeTLS, tls.Data, named, base+"-a")
	waitForSecretSyncReplicas(t, bySelector, opaque.Name, corev1.SecretTypeOpaque, opaque.Data, selected...)
	ready := waitForReadyCount(t, byName, metav1.ConditionTrue, v1alpha1.ReasonSynced, "2/2")
	if ready.Status.Source != srcNS+"/"+tls.Name || ready.Status.TargetNamespaces != 2 || !slicesContain(ready.Finalizers, v1alpha1.CleanupFinalizer) {
		t.Errorf("status %+v, finalizers %v", ready.Status, ready.Finalizers)
	}
	waitForReadyCount(t, bySelector, metav1.ConditionTrue, v1alpha1.ReasonSynced, "2/2")
	waitForEvent(t, byName, v1alpha1.ReasonSynced, "2/2")

	for _, src := range []*corev1.Secret{tls, opaque} {
		now, err := getSecret(src.Namespace, src.Name)
		must(t, err)
		if now.ResourceVersion != src.ResourceVersion || len(now.Labels)+len(now.Annotations) != 0 {
			t.Errorf("source %s written: resourceVersion %s -> %s, labels %v, annotations %v",
				src.Name, src.ResourceVersion, now.ResourceVersion, now.Labels, now.Annotations)
		}
	}
}

func slicesContain(values []string, want string) bool {
	for _, v := range values {
		if v == want {
			return true
		}
	}
	return false
}

// An operator rewrites its Secret's data and metadata every second; the replicas follow
// each rewrite and end exactly equal to the last one. cmsync never writes the source.
func TestSecretSyncFollowsAnOperatorRewritingItsSource(t *testing.T) {
	startController(t, withSecrets())
	srcNS := newNamespace(t, "ssync-src", nil)
	a, b := newNamespace(t, "ssync-dst", nil), newNamespace(t, "ssync-dst", nil)
	src := plainSecret(t, srcNS, "pg-app", corev1.SecretTypeOpaque, map[string][]byte{"password": []byte("0")})
	sync := newSecretSync(
		t,
		v1alpha1.SecretSyncSpec{SourceNamespace: srcNS, SecretName: src.Name, ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespaces: []string{a, b}}},
	)
	waitForSecretSyncReplicas(t, sync, src.Name, corev1.SecretTypeOpaque, src.Data, a, b)

	const rewrites = 6
	var last map[string][]byte
	for i := 1; i <= rewrites; i++ {
		rev := strconv.Itoa(i)
		last = map[string][]byte{"password": []byte("rotated-" + rev), "uri": []byte("postgres://app@db/" + rev)}
		update(t, src, func(s *corev1.Secret) {
			s.Data = last
			s.Labels = map[string]string{"operator.example/revision": rev}
			s.Annotations = map[string]string{"operator.example/rotated-at": rev}
		})
		time.Sleep(time.Second)
	}
	waitForSecretSyncReplicas(t, sync, src.Name, corev1.SecretTypeOpaque, last, a, b)
	eventually(t, timeout, "replicas carry the source's last metadata", func() error {
		for ns, r := range secretSyncReplicas(t, sync) {
			if r.Labels["operator.example/revision"] != strconv.Itoa(rewrites) || r.Annotations["operator.example/rotated-at"] != strconv.Itoa(rewrites) {
				return fmt.Errorf("replica in %s: labels %v annotations %v", ns, r.Labels, r.Annotations)
			}
		}
		return nil
	})
	now, err := getSecret(srcNS, src.Name)
	must(t, err)
	for _, field := range now.ManagedFields {
		if field.Manager == v1alpha1.FieldManager {
			t.Errorf("cmsync wrote the source: %+v", field)
		}
	}
	if _, ok := now.Labels[v1alpha1.ReplicateLabel]; ok || now.Annotations[v1alpha1.StatusAnnotation] != "" {
		t.Errorf("cmsync's keys on the source: %v %v", now.Labels, now.Annotations)
	}
}

// Spec edits move the replicas: other targets, a new name, a key filter; deleting the
// SecretSync deletes its replicas through its finalizer, and nothing else.
func TestSecretSyncFollowsItsSpecAndCleansUp(t *testing.T) {
	startController(t, withSecrets())
	srcNS := newNamespace(t, "ssync-src", nil)
	a, b, c := newNamespace(t, "ssync-dst", nil), newNamespace(t, "ssync-dst", nil), newNamespace(t, "ssync-dst", nil)
	data := map[string][]byte{"username": []byte("app"), "password": []byte("s3cret")}
	src := plainSecret(t, srcNS, "db", corev1.SecretTypeOpaque, data)
	bystander := plainSecret(t, c, "unrelated", corev1.SecretTypeOpaque, map[string][]byte{"k": []byte("v")})
	sync := newSecretSync(
		t,
		v1alpha1.SecretSyncSpec{SourceNamespace: srcNS, SecretName: src.Name, ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespaces: []string{a, b}}},
	)
	waitForSecretSyncReplicas(t, sync, "db", corev1.SecretTypeOpaque, data, a, b)

	update(t, sync, func(s *v1alpha1.SecretSync) { s.Spec.DestinationNamespaces = []string{b, c} })
	waitForSecretSyncReplicas(t, sync, "db", corev1.SecretTypeOpaque, data, b, c)

	update(t, sync, func(s *v1alpha1.SecretSync) {
		s.Spec.TargetName = "app-db"
		s.Spec.Keys = []string{"password"}
	})
	waitForSecretSyncReplicas(t, sync, "app-db", corev1.SecretTypeOpaque, map[string][]byte{"password": data["password"]}, b, c)
	for _, ns := range []string{b, c} {
		if _, err := getSecret(ns, "db"); !apierrors.IsNotFound(err) {
			t.Errorf("the replica under its former name is still in %s: %v", ns, err)
		}
	}

	must(t, k8s.Delete(context.Background(), sync))
	eventually(t, timeout, "replicas and SecretSync gone", func() error {
		if left := secretSyncReplicas(t, sync); len(left) > 0 {
			return fmt.Errorf("replicas left in %d namespaces", len(left))
		}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sync), &v1alpha1.SecretSync{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("SecretSync still there: %v", err)
		}
		return nil
	})
	for _, kept := range []*corev1.Secret{src, bystander} {
		if _, err := getSecret(kept.Namespace, kept.Name); err != nil {
			t.Errorf("%s/%s: %v", kept.Namespace, kept.Name, err)
		}
	}
}

// One owner per replica: a labelled source's replica is not taken by a SecretSync
// naming the same Secret, nor one SecretSync's by another, nor a Secret cmsync does
// not manage; each loser reports the conflict and changes nothing.
func TestSecretSyncConflicts(t *testing.T) {
	startController(t, withSecrets())
	srcNS := newNamespace(t, "ssync-src", nil)
	dst := newNamespace(t, "ssync-dst", nil)
	labelled := newSecretSource(t, srcNS, "shared", corev1.SecretTypeOpaque, map[string]string{v1alpha1.TargetNamespacesAnnotation: dst},
		map[string][]byte{"k": []byte("labelled")})
	waitForSecretReplicas(t, labelled, labelled.Data, dst)
	late := newSecretSync(
		t,
		v1alpha1.SecretSyncSpec{SourceNamespace: srcNS, SecretName: "shared", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}},
	)
	got := waitForReadyCount(t, late, metav1.ConditionFalse, v1alpha1.ReasonDegraded, "0/1")
	if len(got.Status.FailedNamespaces) != 1 || got.Status.FailedNamespaces[0].Reason != v1alpha1.ReasonConflict ||
		!strings.Contains(got.Status.FailedNamespaces[0].Message, "made for its annotations") {
		t.Errorf("failedNamespaces %+v", got.Status.FailedNamespaces)
	}
	waitForEvent(t, late, v1alpha1.ReasonConflict, "0/1")

	other := plainSecret(t, srcNS, "other", corev1.SecretTypeOpaque, map[string][]byte{"k": []byte("other")})
	first := newSecretSync(
		t,
		v1alpha1.SecretSyncSpec{
			SourceNamespace: srcNS,
			SecretName:      other.Name,
			ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespace: dst, TargetName: "one"},
		},
	)
	waitForSecretSyncReplicas(t, first, "one", corev1.SecretTypeOpaque, other.Data, dst)
	second := newSecretSync(
		t,
		v1alpha1.SecretSyncSpec{SourceNamespace: srcNS, SecretName: "shared", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst, TargetName: "one"}},
	)
	got = waitForReadyCount(t, second, metav1.ConditionFalse, v1alpha1.ReasonDegraded, "0/1")
	if msg := got.Status.FailedNamespaces[0].Message; !strings.Contains(msg, "managed by SecretSync "+first.Name) {
		t.Errorf("conflict message %q", msg)
	}
	theirs := plainSecret(t, dst, "theirs", corev1.SecretTypeOpaque, map[string][]byte{"k": []byte("theirs")})
	third := newSecretSync(
		t,
		v1alpha1.SecretSyncSpec{
			SourceNamespace: srcNS,
			SecretName:      other.Name,
			ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespace: dst, TargetName: "theirs"},
		},
	)
	got = waitForReadyCount(t, third, metav1.ConditionFalse, v1alpha1.ReasonDegraded, "0/1")
	if msg := got.Status.FailedNamespaces[0].Message; !strings.Contains(msg, "not managed by cmsync") {
		t.Errorf("conflict message %q", msg)
	}

	consistently(t, 2*time.Second, "every replica keeps its owner and content", func() error {
		for _, check := range []struct {
			name string
			data string
		}{{"shared", "labelled"}, {"one", "other"}, {"theirs", "theirs"}} {
			s, err := getSecret(dst, check.name)
			if err != nil || string(s.Data["k"]) != check.data {
				return fmt.Errorf("%s: %v %q", check.name, err, s.Data["k"])
			}
		}
		return nil
	})
	if now, err := getSecret(dst, theirs.Name); err != nil || now.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("the unmanaged Secret was written: %v", err)
	}
}

// A service-account token must not leave its namespace: a SecretSync naming one is
// Invalid and makes no replica.
func TestSecretSyncOfAServiceAccountTokenIsInvalid(t *testing.T) {
	startController(t, withSecrets())
	srcNS := newNamespace(t, "ssync-src", nil)
	dst := newNamespace(t, "ssync-dst", nil)
	must(t, k8s.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "robot"}}))
	token := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "robot-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "robot"}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}
	must(t, k8s.Create(context.Background(), token))
	sync := newSecretSync(
		t,
		v1alpha1.SecretSyncSpec{SourceNamespace: srcNS, SecretName: token.Name, ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}},
	)
	got := waitForReadyCount(t, sync, metav1.ConditionFalse, v1alpha1.ReasonInvalid, "")
	if msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "a token must not leave its namespace") {
		t.Errorf("message %q", msg)
	}
	waitForEvent(t, sync, v1alpha1.ReasonInvalid, "token")
	consistently(t, 2*time.Second, "no replica of the token", func() error {
		if _, err := getSecret(dst, token.Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("replica of a token: %v", err)
		}
		return nil
	})
}

// Bad specs: the schema refuses what it can, with the field named; cmsync reports the
// rest Invalid and changes nothing; a missing source is SourceNotFound until it comes.
func TestSecretSyncBadSpecsAndMissingSource(t *testing.T) {
	startController(t, withSecrets())
	srcNS := newNamespace(t, "ssync-src", nil)
	dst := newNamespace(t, "ssync-dst", nil)
	for _, bad := range []struct {
		spec v1alpha1.SecretSyncSpec
		want string
	}{
		{v1alpha1.SecretSyncSpec{SourceNamespace: srcNS, ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}}, "spec.secretName"},
		{v1alpha1.SecretSyncSpec{SourceNamespace: srcNS, SecretName: "x"}, "set destinationNamespace, destinationNamespaces"},
		{
			v1alpha1.SecretSyncSpec{SourceNamespace: srcNS, SecretName: "x", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: srcNS}},
			"must differ from sourceNamespace",
		},
		{v1alpha1.SecretSyncSpec{SourceNamespace: srcNS, SecretName: "X", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}}, "spec.secretName"},
	} {
		err := k8s.Create(context.Background(), &v1alpha1.SecretSync{ObjectMeta: metav1.ObjectMeta{Name: "bad-" + randomSuffix()}, Spec: bad.spec})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want Invalid naming %q", bad.spec, err, bad.want)
		}
	}

	malformed := newSecretSync(
		t,
		v1alpha1.SecretSyncSpec{SourceNamespace: srcNS, SecretName: "x", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespaces: []string{"team-[a"}}},
	)
	got := waitForReadyCount(t, malformed, metav1.ConditionFalse, v1alpha1.ReasonInvalid, "")
	if msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "malformed glob") {
		t.Errorf("message %q", msg)
	}
	reserved := newSecretSync(
		t,
		v1alpha1.SecretSyncSpec{
			SourceNamespace: srcNS,
			SecretName:      "x",
			ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespace: dst, TargetName: v1alpha1.RootCAConfigMapName},
		},
	)
	waitForReadyCount(t, reserved, metav1.ConditionFalse, v1alpha1.ReasonInvalid, "")

	late := newSecretSync(t, v1alpha1.SecretSyncSpec{SourceNamespace: srcNS, SecretName: "late", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}})
	got = waitForReadyCount(t, late, metav1.ConditionFalse, v1alpha1.ReasonSourceNotFound, "0/1")
	if msg := meta.FindStatusCondition(
		got.Status.Conditions,
		v1alpha1.ConditionReady,
	).Message; !strings.Contains(
		msg,
		"source Secret "+srcNS+"/late not found",
	) {
		t.Errorf("message %q", msg)
	}
	src := plainSecret(t, srcNS, "late", corev1.SecretTypeOpaque, map[string][]byte{"k": []byte("v")})
	waitForSecretSyncReplicas(t, late, "late", corev1.SecretTypeOpaque, src.Data, dst)
	waitForReadyCount(t, late, metav1.ConditionTrue, v1alpha1.ReasonSynced, "1/1")
}
