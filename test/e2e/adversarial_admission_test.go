//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// takerIn returns a client acting as a user who may create ConfigMapSyncs (a real
// ClusterRole and ClusterRoleBinding), bound to the built-in "edit" ClusterRole in
// namespace: whom the admission policy lets take another replicator's copy over
// (kubectl cmsync migrate --apply). The bindings go when the test ends.
func takerIn(t *testing.T, namespace string) client.Client {
	t.Helper()
	ctx := context.Background()
	name := "cmsync-taker-" + randomSuffix()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"configmapsyncs"}, Verbs: []string{"create"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}},
	}
	edit := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}},
	}
	for _, obj := range []client.Object{role, binding, edit} {
		must(t, harness.K8s.Create(ctx, obj))
	}
	t.Cleanup(func() {
		_ = harness.K8s.Delete(context.Background(), binding)
		_ = harness.K8s.Delete(context.Background(), role)
	})
	cfg := rest.CopyConfig(harness.AdminConfig(t))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: harness.K8s.Scheme()})
	must(t, err)
	eventually(t, 30*time.Second, "the taker's bindings in effect", func() error {
		probe := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe"}, Spec: v1alpha1.ConfigMapSyncSpec{
			SourceNamespace: "default", ConfigMapName: "rbac-probe", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: namespace}}}
		if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "rbac-probe"}}, client.DryRunAll)
	})
	return c
}

// markersOf are the labels and annotation that kubectl cmsync migrate --apply writes
// onto a copy it takes over as a replica of source (the annotation form).
func markersOf(kind string, source types.NamespacedName) (labels, annotations map[string]string) {
	labels, annotations, _ = desired.ReplicaMarkers(desired.AnnotationOwner(kind, source))
	return labels, annotations
}

// withMarkers adds the markers to obj's labels and annotations.
func withMarkers(obj client.Object, labels, annotations map[string]string) {
	l, a := obj.GetLabels(), obj.GetAnnotations()
	if l == nil {
		l = map[string]string{}
	}
	if a == nil {
		a = map[string]string{}
	}
	maps.Copy(l, labels)
	maps.Copy(a, annotations)
	obj.SetLabels(l)
	obj.SetAnnotations(a)
}

// expectAdmitted fails the test when err is not nil.
func expectAdmitted(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s was refused: %v", what, err)
	}
}

// The take-over door of the admission policy (kubectl cmsync migrate --apply) opens
// only for a user who may create ConfigMapSyncs, and only to cmsync's markers. An
// editor of a namespace who gives a ConfigMap of their own a reflector marker naming a
// real source cannot then make it that source's "replica" — not with data of their
// choosing, not with a finalizer that would make it undeletable, not even with the
// markers alone. The user who may take copies over is refused every change but the
// markers: data, a finalizer, owner references, another label, cmsync.io/content-hash.
// With the markers alone the peer's copy in the source's target becomes a replica in
// place (same uid, same data), and cmsync, which reported it as a conflict until then,
// keeps it as its own.
func TestTakeOverIsAnAdministratorsAndChangesOnlyMarkers(t *testing.T) {
	harness.StartController(t, "--secrets=enabled")
	ctx := context.Background()
	src, team := harness.NewNamespace(t, "platform", nil), harness.NewNamespace(t, "tenant", nil)
	harness.DeleteSourcesAtEnd(t, []string{src})
	editor, taker := editorIn(t, team), takerIn(t, team)
	sourceKey, secretKey := types.NamespacedName{Namespace: src, Name: "ca"}, types.NamespacedName{Namespace: src, Name: "token"}
	reflected := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: name,
			Annotations: map[string]string{"reflector.v1.k8s.emberstack.com/reflects": sourceKey.String()}},
			Data: map[string]string{"ca.crt": "pem"}}
	}
	kubed := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: name, Labels: map[string]string{
			"kubed.appscode.com/origin.namespace": src, "kubed.appscode.com/origin.name": "token",
		}}, Data: map[string][]byte{"token": []byte("t")}}
	}

	// The peers' copies where the sources' replicas go, then the sources in cmsync's form,
	// as migrate leaves them before it takes the copies over: cmsync reports conflicts.
	theirs, secret := reflected("ca"), kubed("token")
	must(t, harness.K8s.Create(ctx, theirs))
	must(t, harness.K8s.Create(ctx, secret))
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "ca", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: team}},
		Data: map[string]string{"ca.crt": "pem"},
	}))
	must(t, harness.K8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "token", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: team}},
		StringData: map[string]string{"token": "t"},
	}))
	harness.WaitForAnnotation(t, src, "ca", v1alpha1.StatusAnnotation, v1alpha1.StatusDegraded)
	waitForSecretAnnotation(t, src, "token", v1alpha1.StatusAnnotation, v1alpha1.StatusDegraded)

	labels, annotations := markersOf("ConfigMap", sourceKey)
	// tryTakeOver updates a copy with cmsync's markers and change, as c, and checks that
	// a refusal wrote nothing.
	tryTakeOver := func(c client.Client, cm *corev1.ConfigMap, change func(*corev1.ConfigMap)) error {
		t.Helper()
		next := cm.DeepCopy()
		withMarkers(next, labels, annotations)
		if change != nil {
			change(next)
		}
		err := c.Update(ctx, next)
		if err != nil {
			now, getErr := harness.GetConfigMap(team, cm.Name)
			must(t, getErr)
			if now.ResourceVersion != cm.ResourceVersion {
				t.Errorf("%s: refused, yet its resourceVersion moved from %s to %s", cm.Name, cm.ResourceVersion, now.ResourceVersion)
			}
		}
		return err
	}
	changedData := func(cm *corev1.ConfigMap) { cm.Data["ca.crt"] = "attacker's CA" }
	finalizer := func(cm *corev1.ConfigMap) { cm.Finalizers = append(cm.Finalizers, "example.com/never") }
	notOnlyMarkers := "changes nothing but cmsync's markers"
	claim := "taking over a copy as a replica of " + sourceKey.String()
	notTheirs := "is for a user who may create ConfigMapSyncs (kubectl cmsync migrate --apply)"

	// The editor, with a copy of their own: refused, whatever comes with the markers.
	own := reflected("own-" + randomSuffix())
	must(t, editor.Create(ctx, own))
	expectRefused(t, "an editor's take-over with data of their choosing", tryTakeOver(editor, own, changedData), claim, notOnlyMarkers)
	expectRefused(t, "an editor's take-over with a finalizer", tryTakeOver(editor, own, finalizer), claim, notOnlyMarkers)
	expectRefused(t, "an editor's take-over of markers alone", tryTakeOver(editor, own, nil), claim, notTheirs)
	expectRefused(t, "an editor's take-over of the peer's copy", tryTakeOver(editor, theirs, nil), claim, notTheirs)
	// Nothing made it a replica: the editor can still delete their own copy.
	must(t, editor.Delete(ctx, own))

	// The user who may take copies over: refused anything beyond the markers.
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "owner-" + randomSuffix()}}
	must(t, harness.K8s.Create(ctx, owner))
	for _, c := range []struct {
		what   string
		change func(*corev1.ConfigMap)
	}{
		{"changed data", changedData},
		{"a finalizer", finalizer},
		{"an owner reference", func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = append(cm.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID})
		}},
		{"an owner reference to a ConfigMapSync that is no controller", func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = append(cm.OwnerReferences, metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(),
				Kind: v1alpha1.ConfigMapSyncKind, Name: "any", UID: uuid.NewUUID()})
		}},
		{"cmsync.io/content-hash", func(cm *corev1.ConfigMap) { cm.Labels[v1alpha1.ContentHashLabel] = strings.Repeat("0", 40) }},
		{"another label", func(cm *corev1.ConfigMap) { cm.Labels["team"] = "platform" }},
		{"a removed peer marker", func(cm *corev1.ConfigMap) { delete(cm.Annotations, "reflector.v1.k8s.emberstack.com/reflects") }},
	} {
		expectRefused(t, "a take-over with "+c.what, tryTakeOver(taker, theirs, c.change), claim, notOnlyMarkers)
	}
	// A source the copy's own markers do not name is no take-over at all.
	expectRefused(t, "a take-over as a replica of another source", tryTakeOver(taker, theirs, func(cm *corev1.ConfigMap) {
		cm.Annotations[v1alpha1.SourceAnnotation] = src + "/other"
	}), "only cmsync writes objects labelled app.kubernetes.io/managed-by=cmsync")

	// The same for a Secret that kubed's labels tie to its source.
	secretLabels, secretAnnotations := markersOf("Secret", secretKey)
	forged := kubed("own-" + randomSuffix())
	must(t, editor.Create(ctx, forged))
	withMarkers(forged, secretLabels, secretAnnotations)
	forged.Data["token"] = []byte("attacker's token")
	expectRefused(t, "an editor's take-over of a Secret with data of their choosing", editor.Update(ctx, forged),
		"taking over a copy as a replica of "+secretKey.String(), notOnlyMarkers)
	forged.Data["token"] = []byte("t")
	expectRefused(t, "an editor's take-over of a Secret's markers alone", editor.Update(ctx, forged), notTheirs)
	changed := secret.DeepCopy()
	withMarkers(changed, secretLabels, secretAnnotations)
	changed.Data["token"] = []byte("another token")
	expectRefused(t, "a take-over of a Secret with changed data", taker.Update(ctx, changed), notOnlyMarkers)

	// The markers alone: admitted, each copy a replica in place, which cmsync then keeps.
	taken := theirs.DeepCopy()
	withMarkers(taken, labels, annotations)
	expectAdmitted(t, "a take-over of markers alone", taker.Update(ctx, taken))
	if taken.UID != theirs.UID || taken.Data["ca.crt"] != "pem" || !desired.IsReplica(taken) || taken.Labels[v1alpha1.ContentHashLabel] != "" {
		t.Errorf("the taken-over copy: uid %s -> %s, data %v, labels %v", theirs.UID, taken.UID, taken.Data, taken.Labels)
	}
	withMarkers(secret, secretLabels, secretAnnotations)
	expectAdmitted(t, "a take-over of a Secret's markers alone", taker.Update(ctx, secret))
	harness.WaitForAnnotation(t, src, "ca", v1alpha1.StatusAnnotation, v1alpha1.StatusSynced)
	waitForSecretAnnotation(t, src, "token", v1alpha1.StatusAnnotation, v1alpha1.StatusSynced)
	for _, obj := range []client.Object{theirs, secret} {
		now := obj.DeepCopyObject().(client.Object)
		must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(obj), now))
		if now.GetUID() != obj.GetUID() {
			t.Errorf("%s was replaced (uid %s -> %s), not taken over", obj.GetName(), obj.GetUID(), now.GetUID())
		}
	}
	// Now a replica: protected from the taker like from everyone.
	expectRefused(t, "the taker adding a finalizer to the replica", taker.Patch(ctx, taken, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":["example.com/never"]}}`))), "is a replica of "+sourceKey.String()+" kept by cmsync")
}

// A write that changes nothing is not an edit: an editor of the target namespace may
// write a ConfigMap or Secret replica back as it is — the re-encryption of every Secret
// after an encryption-key rotation (kubectl get -o json | kubectl replace -f -), the
// storage version migrator's empty merge patch, a backup tool's restore, a PUT that
// sends an empty map or list where the replica has none — and nothing moves. Every real
// change is still refused: one data value, one label, one annotation, the owner
// references, a finalizer, and managedFields (cmsync reads from them who wrote a
// replica's content).
func TestUnchangedReplicaWritesAreAdmitted(t *testing.T) {
	harness.StartController(t, "--secrets=enabled")
	ctx := context.Background()
	src, team := harness.NewNamespace(t, "platform", nil), harness.NewNamespace(t, "tenant", nil)
	harness.DeleteSourcesAtEnd(t, []string{src})
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "settings", Labels: map[string]string{v1alpha1.ReplicateLabel: "true", "tier": "web"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: team, "owner": "platform"}},
		Data: map[string]string{"level": "info", "mode": "fast"},
	}))
	must(t, harness.K8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "db", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: team}},
		StringData: map[string]string{"password": "p", "user": "u"},
	}))
	harness.WaitForReplicas(t, src, "settings", 30*time.Second, team)
	waitForSecretValue(t, "db", "password", "p", team)
	harness.WaitForAnnotation(t, src, "settings", v1alpha1.StatusAnnotation, v1alpha1.StatusSynced)
	waitForSecretAnnotation(t, src, "db", v1alpha1.StatusAnnotation, v1alpha1.StatusSynced)
	editor := editorIn(t, team)

	for _, replica := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "settings"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "db"}},
	} {
		kind := "ConfigMap"
		if _, ok := replica.(*corev1.Secret); ok {
			kind = "Secret"
		}
		key := client.ObjectKeyFromObject(replica)
		before := replica.DeepCopyObject().(client.Object)
		must(t, editor.Get(ctx, key, before))
		unchanged := func(what string, err error) {
			t.Helper()
			expectAdmitted(t, kind+": "+what, err)
			now := replica.DeepCopyObject().(client.Object)
			must(t, harness.K8s.Get(ctx, key, now))
			if now.GetResourceVersion() != before.GetResourceVersion() {
				t.Errorf("%s: %s moved the resourceVersion from %s to %s", kind, what, before.GetResourceVersion(), now.GetResourceVersion())
			}
		}

		// Read, then written back as read (managedFields and all).
		same := before.DeepCopyObject().(client.Object)
		unchanged("a PUT of the replica as read", editor.Update(ctx, same))
		// kubectl get -o json shows no managedFields; kubectl replace sends none back.
		same = before.DeepCopyObject().(client.Object)
		same.SetManagedFields(nil)
		unchanged("kubectl replace of kubectl get's output", editor.Update(ctx, same))
		// The storage version migrator: a merge patch of the resourceVersion alone.
		migration := fmt.Sprintf(`{"apiVersion":"v1","kind":%q,"metadata":{"resourceVersion":%q}}`, kind, before.GetResourceVersion())
		unchanged("the storage version migrator's patch",
			editor.Patch(ctx, before.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, []byte(migration))))
		// An empty map or list where the replica has none is the same object.
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(before)
		must(t, err)
		u := &unstructured.Unstructured{Object: raw}
		u.SetAPIVersion("v1")
		u.SetKind(kind)
		meta := u.Object["metadata"].(map[string]any)
		meta["finalizers"], meta["ownerReferences"] = []any{}, []any{}
		if kind == "ConfigMap" {
			u.Object["binaryData"] = map[string]any{}
		}
		unchanged("a PUT with empty finalizers, owner references and binaryData", editor.Update(ctx, u))

		// Every real change: refused, nothing written.
		told := kind + " " + team + "/" + key.Name + " is a replica of " + src + "/" + key.Name + " kept by cmsync"
		data := `{"data":{"level":"debug"}}`
		if kind == "Secret" {
			data = `{"data":{"password":"` + base64.StdEncoding.EncodeToString([]byte("x")) + `"}}`
		}
		for _, c := range []struct{ what, patch string }{
			{"one data value", data},
			{"one label", `{"metadata":{"labels":{"tier":"db"}}}`},
			{"one annotation", `{"metadata":{"annotations":{"owner":"tenant"}}}`},
			{"owner references", `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"` + team +
				`","uid":"` + string(uuid.NewUUID()) + `"}]}}`},
			{"a finalizer", `{"metadata":{"finalizers":["example.com/never"]}}`},
			{"managedFields stripped", `{"metadata":{"managedFields":[{}]}}`},
		} {
			target := replica.DeepCopyObject().(client.Object)
			expectRefused(t, kind+": a change of "+c.what, editor.Patch(ctx, target, client.RawPatch(types.MergePatchType, []byte(c.patch))), told)
		}
		now := replica.DeepCopyObject().(client.Object)
		must(t, harness.K8s.Get(ctx, key, now))
		if now.GetResourceVersion() != before.GetResourceVersion() {
			t.Errorf("%s: refused changes moved the resourceVersion from %s to %s", kind, before.GetResourceVersion(), now.GetResourceVersion())
		}
	}
}

// Fuzz the admission policy's take-over and no-op rules against the real API server
// (CEL is the code): random pairs of an object as stored (a replica, or another
// replicator's copy tied to a source by reflector's, kubernetes-replicator's or kubed's
// markers, or by none; absent and empty maps; finalizers; owner references) and an
// update of it (data, binaryData, immutable, labels, annotations, finalizers and owner
// references changed, added, removed, emptied, cmsync's markers added), sent as a
// server-side dry run by an editor or by a user who may create ConfigMapSyncs. Each
// answer must be the one admitsUpdate, the rule written in Go, gives. The seed is
// logged; CMSYNC_ADMISSION_SEED replays one.
func TestFuzzProtectReplicasPolicy(t *testing.T) {
	// cmsync's Pod there would delete the stand-in replicas, whose sources do not exist.
	harness.SkipOnExistingCluster(t)
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CMSYNC_ADMISSION_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		must(t, err)
	}
	t.Logf("seed %d (CMSYNC_ADMISSION_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	ns := harness.NewNamespace(t, "fuzz", nil)
	// Its stand-ins carry peers' markers and cmsync's: later scenarios (a migrate
	// preview, a controller's start) must not meet them.
	t.Cleanup(func() {
		_ = harness.K8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	users := []fuzzUser{{"editor", editorIn(t, ns), false}, {"taker", takerIn(t, ns), true}}
	// cmsync itself writes the replicas the rule protects.
	cfg := rest.CopyConfig(harness.AdminConfig(t))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: harness.CmsyncUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + harness.ReleaseNamespace, "system:authenticated"}}
	cmsync, err := client.New(cfg, client.Options{Scheme: harness.K8s.Scheme()})
	must(t, err)
	// Real owners, so that the garbage collector leaves the stored objects alone.
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	must(t, harness.K8s.Create(ctx, owner))
	sync := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "fuzz-" + randomSuffix()}, Spec: v1alpha1.ConfigMapSyncSpec{
		SourceNamespace: "default", ConfigMapName: "absent-" + randomSuffix(), ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: ns}}}
	must(t, harness.K8s.Create(ctx, sync))
	t.Cleanup(func() { _ = harness.K8s.Delete(context.Background(), sync) })
	f := &adversary{rng: rng, ns: ns, owner: owner, sync: sync}

	stored := make([]*unstructured.Unstructured, 0, 32)
	for i := range 32 {
		obj := f.storedObject(i)
		writer := harness.K8s
		if obj.GetLabels()[v1alpha1.ManagedByLabel] == v1alpha1.ManagedByValue || gainsAMarker(&unstructured.Unstructured{}, obj) {
			writer = cmsync
		}
		must(t, writer.Create(ctx, obj, client.FieldOwner(v1alpha1.FieldManager)))
		stored = append(stored, obj)
	}

	const cases = 1500
	seen := map[verdict]int{}
	start := time.Now()
	for i := range cases {
		old := stored[rng.IntN(len(stored))]
		user := users[rng.IntN(len(users))]
		next, did := f.update(old)
		want := admitsUpdate(old, next, user.mayTakeOver)
		// Half the updates name cmsync's field manager, as anyone may: managedFields
		// then change less, and the rule must not lean on them alone.
		opts := []client.UpdateOption{client.DryRunAll}
		if rng.IntN(2) == 0 {
			opts = append(opts, client.FieldOwner(v1alpha1.FieldManager))
			did = append(did, "as field manager cmsync")
		}
		err := user.client.Update(ctx, next.DeepCopy(), opts...)
		switch {
		case err == nil, apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'cmsync-protect-replicas'"):
		case apierrors.IsInvalid(err):
			// The API server's own validation (an immutable object's data) answers first.
			seen["invalid"]++
			continue
		default:
			t.Fatalf("case %d (seed %d): %s updating %s: %v", i, seed, user.name, old.GetName(), err)
		}
		seen[want]++
		if admitted := err == nil; admitted != (want != refusedUpdate) {
			t.Errorf("case %d (seed %d): %s %s %s/%s with %s: admitted %v, the rule says %s (%v)",
				i, seed, user.name, old.GetKind(), old.GetNamespace(), old.GetName(), strings.Join(did, ", "), admitted, want, err)
		}
	}
	t.Logf("%d cases in %s: %v", cases, time.Since(start).Round(time.Millisecond), seen)
	if seen[unchangedUpdate] < cases/40 || seen[takeOverUpdate] < cases/40 || seen[refusedUpdate] < cases/10 || seen["invalid"] > cases/5 {
		t.Errorf("the cases do not cover every answer: %v", seen)
	}
}

type fuzzUser struct {
	name        string
	client      client.Client
	mayTakeOver bool
}

// adversary makes the fuzz's stored objects and their updates.
type adversary struct {
	rng   *rand.Rand
	ns    string
	owner *corev1.ConfigMap
	sync  *v1alpha1.ConfigMapSync
}

const (
	reflectsKey      = "reflector.v1.k8s.emberstack.com/reflects"
	replicateFromKey = "replicator.v1.mittwald.de/replicate-from"
	replicatedKeys   = "replicator.v1.mittwald.de/replicated-keys"
	kubedNamespace   = "kubed.appscode.com/origin.namespace"
	kubedName        = "kubed.appscode.com/origin.name"
)

func (f *adversary) chance(p float64) bool { return f.rng.Float64() < p }

// storedObject is the i-th object as it is stored: a replica, or a peer's copy tied to
// a source in one of the peers' ways, or an object no peer made.
func (f *adversary) storedObject(i int) *unstructured.Unstructured {
	kind := "ConfigMap"
	if i%3 == 2 {
		kind = "Secret"
	}
	name := fmt.Sprintf("obj-%d", i)
	source := fmt.Sprintf("src-%d/%s", f.rng.IntN(3), name)
	labels, annotations := map[string]any{}, map[string]any{}
	switch form := i % 8; {
	case form < 3: // a replica
		sourceKey := types.NamespacedName{Namespace: strings.Split(source, "/")[0], Name: name}
		l, a := markersOf(kind, sourceKey)
		for k, v := range l {
			labels[k] = v
		}
		for k, v := range a {
			annotations[k] = v
		}
		if f.chance(0.5) {
			labels[v1alpha1.ContentHashLabel] = strings.Repeat("ab", 20)
		}
	case form == 3:
		annotations[reflectsKey] = source
	case form == 4:
		annotations[replicateFromKey] = source
	case form == 5:
		annotations[replicatedKeys] = "k"
	case form == 6:
		labels[kubedNamespace], labels[kubedName] = strings.Split(source, "/")[0], name
	case i%16 == 7: // no replica, yet with cmsync's other markers (cmsync wrote them)
		annotations[v1alpha1.SourceAnnotation] = source
	}
	if f.chance(0.5) {
		labels["team"] = "a"
	}
	// A label anyone may put on an object that is not a replica yet.
	if _, ok := labels[v1alpha1.ManagedByLabel]; !ok && f.chance(0.2) {
		labels[v1alpha1.ContentHashLabel] = strings.Repeat("ef", 20)
	}
	if f.chance(0.3) {
		annotations["note"] = "n"
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind}}
	u.SetNamespace(f.ns)
	u.SetName(name)
	if len(labels) > 0 {
		u.Object["metadata"].(map[string]any)["labels"] = labels
	}
	if len(annotations) > 0 {
		u.Object["metadata"].(map[string]any)["annotations"] = annotations
	}
	if f.chance(0.6) {
		u.Object["data"] = map[string]any{"k": f.value(kind, "v"), "l": f.value(kind, "w")}
	}
	if kind == "ConfigMap" && f.chance(0.3) {
		u.Object["binaryData"] = map[string]any{"b": base64.StdEncoding.EncodeToString([]byte{0, 1})}
	}
	if f.chance(0.2) {
		u.Object["immutable"] = f.chance(0.3)
	}
	if f.chance(0.2) {
		u.SetFinalizers([]string{"example.com/hold"})
	}
	if f.chance(0.3) {
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: f.owner.Name, UID: f.owner.UID}})
	}
	if i%16 == 7 && f.chance(0.5) {
		// The real ConfigMapSync, for a Secret too: the garbage collector deletes an
		// object whose owner it cannot find.
		u.SetOwnerReferences(append(u.GetOwnerReferences(), metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(),
			Kind: v1alpha1.ConfigMapSyncKind, Name: f.sync.Name, UID: f.sync.UID}))
	}
	return u
}

// value is v as kind stores it in data.
func (f *adversary) value(kind, v string) string {
	if kind == "Secret" {
		return base64.StdEncoding.EncodeToString([]byte(v))
	}
	return v
}

// update is a random update of stored, with what it changes.
func (f *adversary) update(stored *unstructured.Unstructured) (*unstructured.Unstructured, []string) {
	next := stored.DeepCopy()
	var did []string
	peerSource := peerClaim(stored)
	if stored.GetLabels()[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue && f.chance(0.7) {
		claim := peerSource
		if claim == "" || f.chance(0.1) {
			claim = "src-9/" + stored.GetName()
		}
		ns, name, _ := strings.Cut(claim, "/")
		l, a := markersOf(stored.GetKind(), types.NamespacedName{Namespace: ns, Name: name})
		if f.chance(0.2) {
			delete(l, v1alpha1.SourceIDLabel)
		}
		for k, v := range l {
			setIn(next, "labels", k, v)
		}
		for k, v := range a {
			setIn(next, "annotations", k, v)
		}
		did = append(did, "the markers of "+claim)
		if f.chance(0.3) {
			ref := map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": stored.GetKind() + "Sync",
				"name": f.sync.Name, "uid": string(f.sync.UID), "controller": true}
			refs, _, _ := unstructured.NestedSlice(next.Object, "metadata", "ownerReferences")
			at := f.rng.IntN(len(refs) + 1)
			refs = slices.Insert(refs, at, any(ref))
			must0(unstructured.SetNestedSlice(next.Object, refs, "metadata", "ownerReferences"))
			did = append(did, "a controller reference to a "+stored.GetKind()+"Sync")
		}
	}
	// Mostly one change or none: the answers worth checking lie next to the admitted ones.
	mutations := 0
	switch r := f.rng.Float64(); {
	case r < 0.2:
		mutations = 2
	case r < 0.7:
		mutations = 1
	}
	for range mutations {
		did = append(did, f.mutate(next))
	}
	if len(did) == 0 {
		did = append(did, "nothing")
	}
	return next, did
}

// mutate makes one random change to obj and says what it did.
func (f *adversary) mutate(obj *unstructured.Unstructured) string {
	return mutations[f.rng.IntN(len(mutations))](f, obj)
}

// mutations are the changes an update may make, each saying what it did: to the
// content, the labels and annotations (cmsync's keys among them), the finalizers and
// the owner references, and from absent to empty.
var mutations = []func(f *adversary, obj *unstructured.Unstructured) string{
	func(f *adversary, obj *unstructured.Unstructured) string {
		setMap(obj.Object, "data", "k", f.value(obj.GetKind(), "changed"))
		return "data k changed"
	},
	func(f *adversary, obj *unstructured.Unstructured) string {
		setMap(obj.Object, "data", "new", f.value(obj.GetKind(), "x"))
		return "data key added"
	},
	func(_ *adversary, obj *unstructured.Unstructured) string {
		if m, ok := obj.Object["data"].(map[string]any); ok && len(m) > 0 {
			delete(m, "k")
			return "data k removed"
		}
		obj.Object["data"] = map[string]any{}
		return "empty data"
	},
	func(_ *adversary, obj *unstructured.Unstructured) string {
		field := "binaryData"
		if obj.GetKind() == "Secret" {
			field = "data"
		}
		if m, ok := obj.Object[field].(map[string]any); ok && len(m) > 0 {
			delete(obj.Object, field)
			return field + " removed"
		}
		obj.Object[field] = map[string]any{}
		return "empty " + field
	},
	func(f *adversary, obj *unstructured.Unstructured) string {
		switch v, ok := obj.Object["immutable"]; {
		case ok && v == false:
			delete(obj.Object, "immutable")
			return "immutable false removed"
		case ok:
			return "immutable kept"
		}
		obj.Object["immutable"] = f.chance(0.5)
		return fmt.Sprintf("immutable set to %v", obj.Object["immutable"])
	},
	func(_ *adversary, obj *unstructured.Unstructured) string {
		setIn(obj, "labels", "team", "b")
		return "label team=b"
	},
	func(_ *adversary, obj *unstructured.Unstructured) string {
		setIn(obj, "labels", v1alpha1.ContentHashLabel, strings.Repeat("cd", 20))
		return "content-hash label"
	},
	func(_ *adversary, obj *unstructured.Unstructured) string {
		setIn(obj, "labels", v1alpha1.SourceIDLabel, "not-a-hash")
		return "source-id label not a hash"
	},
	func(f *adversary, obj *unstructured.Unstructured) string { return f.removeOne(obj, "labels") },
	func(_ *adversary, obj *unstructured.Unstructured) string {
		setIn(obj, "annotations", "note", "changed")
		return "annotation note changed"
	},
	func(f *adversary, obj *unstructured.Unstructured) string { return f.removeOne(obj, "annotations") },
	func(_ *adversary, obj *unstructured.Unstructured) string {
		setIn(obj, "annotations", v1alpha1.SourceAnnotation, "src-8/"+obj.GetName())
		return "source annotation names another source"
	},
	func(_ *adversary, obj *unstructured.Unstructured) string {
		obj.SetFinalizers(append(obj.GetFinalizers(), "example.com/never"))
		return "finalizer added"
	},
	func(_ *adversary, obj *unstructured.Unstructured) string {
		if len(obj.GetFinalizers()) > 0 {
			obj.SetFinalizers(nil)
			return "finalizers removed"
		}
		obj.Object["metadata"].(map[string]any)["finalizers"] = []any{}
		return "empty finalizers"
	},
	func(_ *adversary, obj *unstructured.Unstructured) string {
		addOwner(obj, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": string(uuid.NewUUID())})
		return "owner reference to another object"
	},
	func(_ *adversary, obj *unstructured.Unstructured) string {
		meta := obj.Object["metadata"].(map[string]any)
		if len(obj.GetOwnerReferences()) > 0 {
			delete(meta, "ownerReferences")
			return "owner references removed"
		}
		meta["ownerReferences"] = []any{}
		return "empty owner references"
	},
	func(f *adversary, obj *unstructured.Unstructured) string {
		other := "ConfigMapSync"
		if obj.GetKind() == "ConfigMap" {
			other = "SecretSync"
		}
		addOwner(obj, map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": other,
			"name": f.sync.Name, "uid": string(uuid.NewUUID()), "controller": true})
		return "controller reference to a " + other
	},
	func(_ *adversary, obj *unstructured.Unstructured) string {
		refs, _, _ := unstructured.NestedSlice(obj.Object, "metadata", "ownerReferences")
		if len(refs) == 0 {
			return "no owner reference to rewrite"
		}
		ref := refs[0].(map[string]any)
		ref["apiVersion"], ref["kind"] = v1alpha1.GroupVersion.String(), obj.GetKind()+"Sync"
		must0(unstructured.SetNestedSlice(obj.Object, refs, "metadata", "ownerReferences"))
		return "an owner reference rewritten in place into a " + obj.GetKind() + "Sync's"
	},
	func(f *adversary, obj *unstructured.Unstructured) string {
		addOwner(obj, map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": obj.GetKind() + "Sync",
			"name": f.sync.Name, "uid": string(uuid.NewUUID()), "controller": true, "blockOwnerDeletion": f.chance(0.5)})
		return "controller reference to a " + obj.GetKind() + "Sync with blockOwnerDeletion"
	},
	func(_ *adversary, obj *unstructured.Unstructured) string {
		setIn(obj, "labels", v1alpha1.ManagedByLabel, v1alpha1.ManagedByValue)
		return "managed-by label"
	},
	func(_ *adversary, obj *unstructured.Unstructured) string {
		if labels, ok := obj.Object["metadata"].(map[string]any)["labels"].(map[string]any); ok {
			delete(labels, v1alpha1.ManagedByLabel)
		}
		return "managed-by label removed"
	},
}

// removeOne removes a random key of obj's labels or annotations (field), or makes an
// absent one empty.
func (f *adversary) removeOne(obj *unstructured.Unstructured, field string) string {
	meta := obj.Object["metadata"].(map[string]any)
	m, ok := meta[field].(map[string]any)
	if !ok || len(m) == 0 {
		meta[field] = map[string]any{}
		return "empty " + field
	}
	keys := slices.Sorted(maps.Keys(m))
	k := keys[f.rng.IntN(len(keys))]
	delete(m, k)
	return field + " " + k + " removed"
}

// addOwner appends ref to obj's owner references.
func addOwner(obj *unstructured.Unstructured, ref map[string]any) {
	refs, _, _ := unstructured.NestedSlice(obj.Object, "metadata", "ownerReferences")
	must0(unstructured.SetNestedSlice(obj.Object, append(refs, ref), "metadata", "ownerReferences"))
}

func setIn(obj *unstructured.Unstructured, field, key, value string) {
	setMap(obj.Object["metadata"].(map[string]any), field, key, value)
}

func setMap(obj map[string]any, field, key, value string) {
	m, ok := obj[field].(map[string]any)
	if !ok {
		m = map[string]any{}
		obj[field] = m
	}
	m[key] = value
}

func must0(err error) {
	if err != nil {
		panic(err)
	}
}

// peerClaim is the source a peer's markers on obj name ("" for none, or for
// kubernetes-replicator's push form, whose copies name no source).
func peerClaim(obj *unstructured.Unstructured) string {
	a, l := obj.GetAnnotations(), obj.GetLabels()
	switch {
	case a[reflectsKey] != "":
		return a[reflectsKey]
	case a[replicateFromKey] != "":
		return a[replicateFromKey]
	case a[replicatedKeys] != "":
		return "src-0/" + obj.GetName()
	case l[kubedNamespace] != "":
		return l[kubedNamespace] + "/" + l[kubedName]
	}
	return ""
}

var sourceIDValue = regexp.MustCompile(`^[0-9a-f]{40}$`)

// verdict is the policy's answer to an update, and why.
type verdict string

const (
	notThePolicys   verdict = "not the policy's" // labelled a replica neither before nor after, and gaining no marker
	unchangedUpdate verdict = "admitted, unchanged"
	takeOverUpdate  verdict = "admitted, a take-over"
	refusedUpdate   verdict = "refused"
)

// admitsUpdate is the protect-replicas policy's answer to an update of old into next,
// written in Go from docs/protected-replicas.md: an update that leaves an object
// labelled as a replica as it was, or a take-over, by a user who may create
// ConfigMapSyncs, that adds only cmsync's markers to an object that a peer's own
// markers tie to the source it claims. Every other update of an object labelled as a
// replica, before or after, or that gives another object one of cmsync's markers, is
// refused.
func admitsUpdate(old, next *unstructured.Unstructured, mayTakeOver bool) verdict {
	wasReplica := old.GetLabels()[v1alpha1.ManagedByLabel] == v1alpha1.ManagedByValue
	if !wasReplica && next.GetLabels()[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue && !gainsAMarker(old, next) {
		return notThePolicys
	}
	sameBody := sameField(old, next, "data") && sameField(old, next, "binaryData") && sameField(old, next, "type") &&
		sameField(old, next, "immutable") && slices.Equal(old.GetFinalizers(), next.GetFinalizers())
	if sameBody && maps.Equal(old.GetLabels(), next.GetLabels()) && maps.Equal(old.GetAnnotations(), next.GetAnnotations()) &&
		sameOwners(old.GetOwnerReferences(), next.GetOwnerReferences()) {
		return unchangedUpdate
	}
	claim := next.GetAnnotations()[v1alpha1.SourceAnnotation]
	if wasReplica || claim == "" || !tiedTo(old, claim) || !sameBody || !mayTakeOver {
		return refusedUpdate
	}
	if onlyMarkersAdded(old, next) {
		return takeOverUpdate
	}
	return refusedUpdate
}

// gainsAMarker: next carries a source annotation old did not (or another one), or an
// owner reference to a ConfigMapSync, SecretSync or ObjectSync that old does not (an
// owner reference rewritten in place, uid kept, is another one).
func gainsAMarker(old, next *unstructured.Unstructured) bool {
	if claim, ok := next.GetAnnotations()[v1alpha1.SourceAnnotation]; ok {
		if was, ok := old.GetAnnotations()[v1alpha1.SourceAnnotation]; !ok || was != claim {
			return true
		}
	}
	return slices.ContainsFunc(next.GetOwnerReferences(), func(r metav1.OwnerReference) bool {
		return strings.HasPrefix(r.APIVersion, v1alpha1.GroupVersion.Group+"/") &&
			slices.Contains([]string{v1alpha1.ConfigMapSyncKind, "SecretSync", "ObjectSync"}, r.Kind) &&
			!slices.ContainsFunc(old.GetOwnerReferences(), func(o metav1.OwnerReference) bool { return sameOwner(o, r) })
	})
}

// onlyMarkersAdded: next is old with cmsync's markers, as a take-over writes them.
func onlyMarkersAdded(old, next *unstructured.Unstructured) bool {
	markerLabels := []string{v1alpha1.ManagedByLabel, v1alpha1.SourceIDLabel}
	if _, ok := next.GetLabels()[v1alpha1.ContentHashLabel]; ok {
		return false
	}
	if id, ok := next.GetLabels()[v1alpha1.SourceIDLabel]; ok && !sourceIDValue.MatchString(id) {
		return false
	}
	if !sameExcept(old.GetLabels(), next.GetLabels(), markerLabels...) ||
		!sameExcept(old.GetAnnotations(), next.GetAnnotations(), v1alpha1.SourceAnnotation) {
		return false
	}
	oldRefs, refs := old.GetOwnerReferences(), next.GetOwnerReferences()
	if sameOwners(oldRefs, refs) {
		return true
	}
	if len(refs) != len(oldRefs)+1 {
		return false
	}
	var added []metav1.OwnerReference
	for _, r := range refs {
		if !slices.ContainsFunc(oldRefs, func(o metav1.OwnerReference) bool { return sameOwner(o, r) }) {
			added = append(added, r)
		}
	}
	for _, o := range oldRefs {
		if !slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return sameOwner(o, r) }) {
			return false
		}
	}
	if len(added) != 1 {
		return false
	}
	r := added[0]
	return r.APIVersion == v1alpha1.GroupVersion.String() && r.Kind == old.GetKind()+"Sync" &&
		r.Controller != nil && *r.Controller && (r.BlockOwnerDeletion == nil || !*r.BlockOwnerDeletion)
}

// tiedTo: the peers' own markers on old name claim.
func tiedTo(old *unstructured.Unstructured, claim string) bool {
	a, l := old.GetAnnotations(), old.GetLabels()
	if v, ok := a[reflectsKey]; ok && v == claim {
		return true
	}
	if v, ok := a[replicateFromKey]; ok && v == claim {
		return true
	}
	_, keys := a[replicatedKeys]
	_, version := a["replicator.v1.mittwald.de/replicated-from-version"]
	if (keys || version) && strings.HasSuffix(claim, "/"+old.GetName()) {
		return true
	}
	ns, nsOK := l[kubedNamespace]
	name, nameOK := l[kubedName]
	return nsOK && nameOK && ns+"/"+name == claim
}

// sameField compares a top-level field; an absent map and an empty one are the same
// (an absent immutable and false are not).
func sameField(a, b *unstructured.Unstructured, field string) bool {
	x, y := a.Object[field], b.Object[field]
	if m, ok := x.(map[string]any); ok && len(m) == 0 {
		x = nil
	}
	if m, ok := y.(map[string]any); ok && len(m) == 0 {
		y = nil
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// sameExcept: a and b hold the same keys and values but for keys.
func sameExcept(a, b map[string]string, keys ...string) bool {
	for k, v := range a {
		if w, ok := b[k]; !slices.Contains(keys, k) && (!ok || v != w) {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && !slices.Contains(keys, k) {
			return false
		}
	}
	return true
}

func sameOwners(a, b []metav1.OwnerReference) bool { return slices.EqualFunc(a, b, sameOwner) }

func sameOwner(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		sameBool(a.Controller, b.Controller) && sameBool(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
}

// sameBool: both unset, or both set to the same value (an unset field and false are
// not the same object).
func sameBool(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
