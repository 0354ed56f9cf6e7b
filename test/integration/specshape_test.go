package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// badShape is an explicit object's targetName or keys that cmsync, not the CRD's
// schema, refuses: the object is created and reported Invalid, as the annotation form
// is (SPEC §7).
type badShape struct {
	name       string
	targetName string
	keys       []string // nil: no keys field; empty: "keys: []"
	says       string
}

// badNames are targetNames that are not object names.
var badNames = []badShape{
	{name: "upper case and underscore", targetName: "Bad_Name", says: `spec.targetName "Bad_Name": not a valid name: a lowercase RFC 1123 subdomain`},
	{name: "a slash", targetName: "team/ca", says: `spec.targetName "team/ca": not a valid name`},
}

// badKeys are keys lists no key filter can be read from.
var badKeys = []badShape{
	{name: "an empty list", keys: []string{}, says: "spec.keys is empty; remove it to copy every key"},
	{name: "an empty entry", keys: []string{"log-level", ""}, says: "spec.keys[1]: empty key"},
	{name: "a character no key holds", keys: []string{"a/b"}, says: `spec.keys[0]: character '/' cannot appear in a key or key glob`},
	{name: "a malformed glob", keys: []string{"log-[a"}, says: "spec.keys[0]: malformed glob"},
}

// createAsWritten creates sync as a user's manifest would hold it: with shape's
// targetName and, when shape.keys is not nil, a keys field even when it is empty (the
// typed client would leave an empty list out).
func createAsWritten(t *testing.T, sync v1alpha1.Sync, kind string, shape badShape) {
	t.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sync)
	must(t, err)
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
	if shape.targetName != "" {
		must(t, unstructured.SetNestedField(u.Object, shape.targetName, "spec", "targetName"))
	}
	if shape.keys != nil {
		must(t, unstructured.SetNestedStringSlice(u.Object, shape.keys, "spec", "keys"))
	}
	if err := k8s.Create(context.Background(), u); err != nil {
		t.Fatalf("%s with %s refused at create time: %v; want it created and reported Invalid", kind, shape.name, err)
	}
	must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(u), sync))
}

// expectReportedInvalid waits for each sync to be Ready=False, reason Invalid, with a
// message saying what its shape's says, and then asserts that c writes nothing into
// dst and that dst holds no object of list's kind.
func expectReportedInvalid[S v1alpha1.Sync](t *testing.T, c *controllerUnderTest, syncs []S, shapes []badShape, dst string, list client.ObjectList) {
	t.Helper()
	for i, sync := range syncs {
		got := waitForReady(t, sync, metav1.ConditionFalse, v1alpha1.ReasonInvalid)
		if msg := meta.FindStatusCondition(got.SyncStatus().Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, shapes[i].says) {
			t.Errorf("%s: message %q, want it to say %q", shapes[i].name, msg, shapes[i].says)
		}
	}
	consistently(t, 2*time.Second, "nothing written into "+dst, func() error {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if n := c.WritesIn(method, dst); n != 0 {
				return errorf("%d %s requests into %s; last writes:\n%s", n, method, dst, c.LastWrites())
			}
		}
		if err := k8s.List(
			context.Background(),
			list,
			client.InNamespace(dst),
			client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue},
		); err != nil {
			return err
		}
		if n := meta.LenList(list); n != 0 {
			return errorf("%d replicas in %s", n, dst)
		}
		return nil
	})
}

// A ConfigMapSync whose targetName is not a ConfigMap name or whose keys cannot be read
// is created, and reported Ready=False, reason Invalid, naming the field and what is
// wrong; nothing is written.
func TestConfigMapSyncWithABadShapeIsReportedInvalid(t *testing.T) {
	c := startController(t)
	platform, dst := newNamespace(t, "platform", nil), newNamespace(t, "team", nil)
	plainConfigMap(t, platform, "settings", map[string]string{"log-level": "debug"})
	shapes := append(append([]badShape{}, badNames...), badKeys...)
	syncs := make([]*v1alpha1.ConfigMapSync, 0, len(shapes))
	for _, shape := range shapes {
		sync := &v1alpha1.ConfigMapSync{
			ObjectMeta: metav1.ObjectMeta{Name: "bad-shape-" + randomSuffix()},
			Spec: v1alpha1.ConfigMapSyncSpec{SourceNamespace: platform, ConfigMapName: "settings",
				ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}},
		}
		createAsWritten(t, sync, v1alpha1.ConfigMapSyncKind, shape)
		syncs = append(syncs, sync)
	}
	expectReportedInvalid(t, c, syncs, shapes, dst, &corev1.ConfigMapList{})
}

// The same for a SecretSync.
func TestSecretSyncWithABadShapeIsReportedInvalid(t *testing.T) {
	c := startController(t, withSecrets())
	platform, dst := newNamespace(t, "platform", nil), newNamespace(t, "team", nil)
	plainSecret(t, platform, "db", corev1.SecretTypeOpaque, map[string][]byte{"password": []byte("s3cret")})
	shapes := append(append([]badShape{}, badNames...), badKeys...)
	syncs := make([]*v1alpha1.SecretSync, 0, len(shapes))
	for _, shape := range shapes {
		sync := &v1alpha1.SecretSync{
			ObjectMeta: metav1.ObjectMeta{Name: "bad-shape-" + randomSuffix()},
			Spec: v1alpha1.SecretSyncSpec{SourceNamespace: platform, SecretName: "db",
				ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}},
		}
		createAsWritten(t, sync, v1alpha1.SecretSyncKind, shape)
		syncs = append(syncs, sync)
	}
	expectReportedInvalid(t, c, syncs, shapes, dst, &corev1.SecretList{})
}

// The same for an ObjectSync, which has a targetName and no keys.
func TestObjectSyncWithABadTargetNameIsReportedInvalid(t *testing.T) {
	c := startController(t, withObjectKinds(t, policiesAndLimits))
	platform, dst := newNamespace(t, "platform", nil), newNamespace(t, "team", nil)
	src := defaultDenyPolicy(t, platform)
	syncs := make([]*v1alpha1.ObjectSync, 0, len(badNames))
	for _, shape := range badNames {
		sync := &v1alpha1.ObjectSync{
			ObjectMeta: metav1.ObjectMeta{Name: "bad-shape-" + randomSuffix()},
			Spec:       v1alpha1.ObjectSyncSpec{Source: policySource(platform, src.Name), DestinationNamespace: dst},
		}
		createAsWritten(t, sync, v1alpha1.ObjectSyncKind, shape)
		syncs = append(syncs, sync)
	}
	expectReportedInvalid(t, c, syncs, badNames, dst, &networkingv1.NetworkPolicyList{})
}
