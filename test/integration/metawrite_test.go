package integration

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/replicator/replicastore/metawrite"
)

// answer is what the API server sent back for one write.
type answer struct {
	method, contentType string
	bytes               int
}

// newMetaWriter returns a metawrite.Client on the test's API server that asks for
// metadata-only answers for objects of metadataFrom bytes or more, and the answers it
// has received so far.
func newMetaWriter(t *testing.T, metadataFrom int) (*metawrite.Client, func() []answer) {
	t.Helper()
	var mu sync.Mutex
	var answers []answer
	cfg := rest.CopyConfig(restConfig)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err != nil || req.Method == http.MethodGet {
				return resp, err
			}
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			resp.Body = io.NopCloser(strings.NewReader(string(body)))
			mu.Lock()
			answers = append(answers, answer{req.Method, resp.Header.Get("Content-Type"), len(body)})
			mu.Unlock()
			return resp, err
		})
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	must(t, err)
	writer, err := metawrite.New(cfg, httpClient, k8s.RESTMapper(), metadataFrom)
	must(t, err)
	return writer, func() []answer {
		mu.Lock()
		defer mu.Unlock()
		return append([]answer(nil), answers...)
	}
}

// A create and an update write the whole object, with the field manager and the
// resourceVersion precondition given, and the API server answers with its metadata
// only; refused writes come back as the API's own errors.
func TestMetaWriteAnswersWithMetadataOnly(t *testing.T) {
	ctx := context.Background()
	writer, answers := newMetaWriter(t, 0)
	ns := newNamespace(t, "metawrite", nil)
	big := strings.Repeat("x", 200<<10)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big", Labels: map[string]string{"l": "1"}},
		Data:       map[string]string{"payload": big, "v": "1"},
	}

	created, err := writer.Create(ctx, cm, client.FieldOwner("metawrite-test"))
	must(t, err)
	stored, err := getConfigMap(ns, "big")
	must(t, err)
	if created.UID != stored.UID || created.ResourceVersion != stored.ResourceVersion || created.Labels["l"] != "1" {
		t.Errorf("answered %s/%s %v, stored %s/%s", created.UID, created.ResourceVersion, created.Labels, stored.UID, stored.ResourceVersion)
	}
	if stored.Data["payload"] != big || stored.Data["v"] != "1" || len(stored.ManagedFields) != 1 || stored.ManagedFields[0].Manager != "metawrite-test" {
		t.Errorf("stored %d bytes of payload, v %q, managed fields %v", len(stored.Data["payload"]), stored.Data["v"], stored.ManagedFields)
	}

	cm.ResourceVersion = stored.ResourceVersion
	cm.Data["v"] = "2"
	updated, err := writer.Update(ctx, cm, client.FieldOwner("metawrite-test"))
	must(t, err)
	stored, err = getConfigMap(ns, "big")
	must(t, err)
	if updated.ResourceVersion != stored.ResourceVersion || stored.Data["v"] != "2" || stored.Data["payload"] != big {
		t.Errorf("answered resourceVersion %s, stored %s with v %q", updated.ResourceVersion, stored.ResourceVersion, stored.Data["v"])
	}

	for _, a := range answers() {
		if a.bytes > 4<<10 { // the object is over 200 KiB
			t.Errorf("%s answered %d bytes of %q, want metadata only", a.method, a.bytes, a.contentType)
		}
	}
	if n := len(answers()); n != 2 {
		t.Errorf("%d answers, want 2", n)
	}

	// The resourceVersion of before the update: a conflict, nothing written.
	cm.ResourceVersion = created.ResourceVersion
	cm.Data["v"] = "3"
	if _, err := writer.Update(ctx, cm); !apierrors.IsConflict(err) {
		t.Errorf("update from a stale resourceVersion: %v, want a conflict", err)
	}
	cm.ResourceVersion = ""
	if _, err := writer.Create(ctx, cm); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: %v, want AlreadyExists", err)
	}
	missing := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "no-such-namespace-" + randomSuffix(), Name: "x"}}
	if _, err := writer.Create(ctx, missing); !apierrors.IsNotFound(err) {
		t.Errorf("create in a missing namespace: %v, want NotFound", err)
	}
	if stored, err := getConfigMap(ns, "big"); err != nil || stored.Data["v"] != "2" {
		t.Errorf("after refused writes: v %q, %v", stored.Data["v"], err)
	}

	// Another kind, through the same client: the path comes from the kind.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}, Data: map[string][]byte{"k": []byte("v")}}
	if _, err := writer.Create(ctx, secret); err != nil {
		t.Fatalf("creating a Secret: %v", err)
	}
	got := &corev1.Secret{}
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(secret), got))
	if string(got.Data["k"]) != "v" {
		t.Errorf("Secret data %v", got.Data)
	}
}

// Below the size given, a write asks for the whole object back and returns its
// metadata; from that size up, for the metadata only. Both return what was stored.
func TestMetaWriteAnswersSmallObjectsWhole(t *testing.T) {
	ctx := context.Background()
	writer, answers := newMetaWriter(t, 64<<10)
	ns := newNamespace(t, "metawrite-sizes", nil)
	for _, tc := range []struct {
		name      string
		payload   int
		wantWhole bool
	}{
		{name: "small", payload: 16 << 10, wantWhole: true},
		{name: "large", payload: 128 << 10, wantWhole: false},
	} {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name, Labels: map[string]string{"size": tc.name}},
			Data:       map[string]string{"payload": strings.Repeat("x", tc.payload)},
		}
		before := len(answers())
		created, err := writer.Create(ctx, cm, client.FieldOwner("metawrite-test"))
		must(t, err)
		cm.ResourceVersion = created.ResourceVersion
		cm.Data["v"] = "2"
		updated, err := writer.Update(ctx, cm, client.FieldOwner("metawrite-test"))
		must(t, err)

		stored, err := getConfigMap(ns, tc.name)
		must(t, err)
		if created.UID != stored.UID || updated.UID != stored.UID || updated.ResourceVersion != stored.ResourceVersion ||
			updated.Labels["size"] != tc.name || stored.Data["v"] != "2" || len(stored.Data["payload"]) != tc.payload {
			t.Errorf("%s: answered %s/%s then %s/%s %v; stored %s/%s, v %q, %d bytes of payload", tc.name,
				created.UID, created.ResourceVersion, updated.UID, updated.ResourceVersion, updated.Labels,
				stored.UID, stored.ResourceVersion, stored.Data["v"], len(stored.Data["payload"]))
		}
		got := answers()[before:]
		if len(got) != 2 {
			t.Fatalf("%s: %d answers, want 2", tc.name, len(got))
		}
		for _, a := range got {
			if whole := a.bytes > tc.payload; whole != tc.wantWhole {
				t.Errorf("%s: %s answered %d bytes of %q for a payload of %d, want the whole object: %v",
					tc.name, a.method, a.bytes, a.contentType, tc.payload, tc.wantWhole)
			}
		}
	}
}

// A delete removes the object its metadata names, only when the preconditions hold,
// and its answer comes in protobuf; a missing object is NotFound.
func TestMetaWriteDeletes(t *testing.T) {
	ctx := context.Background()
	writer, answers := newMetaWriter(t, 64<<10)
	ns := newNamespace(t, "metawrite-delete", nil)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed"},
		Data:       map[string]string{"payload": strings.Repeat("x", 1<<10)},
	}
	created, err := writer.Create(ctx, cm, client.FieldOwner("metawrite-test"))
	must(t, err)
	// As the engine sends a delete: the kind's metadata, named.
	at := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed"},
	}
	otherUID := types.UID("00000000-0000-0000-0000-000000000000")
	for name, refused := range map[string]client.Preconditions{
		"another UID":                        {UID: &otherUID},
		"its UID and an old resourceVersion": {UID: &created.UID, ResourceVersion: ptr("1")},
	} {
		if err := writer.Delete(ctx, at, refused); !apierrors.IsConflict(err) {
			t.Errorf("delete on %s: %v, want a conflict", name, err)
		}
	}
	if _, err := getConfigMap(ns, "doomed"); err != nil {
		t.Fatalf("after refused deletes: %v", err)
	}

	before := len(answers())
	must(t, writer.Delete(ctx, at, client.Preconditions{UID: &created.UID, ResourceVersion: &created.ResourceVersion}))
	if _, err := getConfigMap(ns, "doomed"); !apierrors.IsNotFound(err) {
		t.Errorf("after the delete: %v, want NotFound", err)
	}
	got := answers()[before:]
	if len(got) != 1 || got[0].method != http.MethodDelete || got[0].contentType != "application/vnd.kubernetes.protobuf" {
		t.Errorf("answers to the delete: %+v, want one in protobuf", got)
	}
	if err := writer.Delete(ctx, at); !apierrors.IsNotFound(err) {
		t.Errorf("deleting it again: %v, want NotFound", err)
	}

	// Another kind, through the same client: the path comes from the kind.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}}
	_, err = writer.Create(ctx, secret)
	must(t, err)
	must(t, writer.Delete(ctx, secret))
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Secret after its delete: %v, want NotFound", err)
	}
}
