package replicator

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/replicator/desired"
)

// Only the very copy a status write replaced, read with the status that write said,
// counts as already saying it; another version, another status, another source or a
// forgotten source does not.
func TestOwnStatusWritesKnowTheCopyTheyReplaced(t *testing.T) {
	copyOf := func(namespace, name, version string) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: version}}
	}
	synced := desired.SourceStatus{State: v1alpha1.StatusSynced, Synced: "3/3", Message: "in sync in 3 namespaces"}
	degraded := desired.SourceStatus{State: v1alpha1.StatusDegraded, Synced: "2/3", Message: "conflict in b"}

	o := newOwnStatusWrites()
	if o.alreadySays(copyOf("p", "app", "10"), synced) {
		t.Fatal("a source never written already says its status")
	}
	o.wrote(copyOf("p", "app", "10"), synced)
	for _, c := range []struct {
		what   string
		copy   client.Object
		status desired.SourceStatus
		want   bool
	}{
		{"the copy replaced, the status written", copyOf("p", "app", "10"), synced, true},
		{"the copy replaced, another status", copyOf("p", "app", "10"), degraded, false},
		{"a newer copy", copyOf("p", "app", "11"), synced, false},
		{"another source of the same version", copyOf("q", "app", "10"), synced, false},
	} {
		if got := o.alreadySays(c.copy, c.status); got != c.want {
			t.Errorf("%s: alreadySays = %v, want %v", c.what, got, c.want)
		}
	}
	o.forget(client.ObjectKeyFromObject(copyOf("p", "app", "")))
	if o.alreadySays(copyOf("p", "app", "10"), synced) {
		t.Error("a forgotten source still says its status")
	}
}
