package replicator

import (
	"testing"
	"time"

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

// The time of a change whose status write did not land is kept until a status write
// lands or the annotations already say it, and goes with the source.
func TestOwnStatusWritesKeepAnUnwrittenChange(t *testing.T) {
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "p", Name: "app", ResourceVersion: "10"}}
	key := client.ObjectKeyFromObject(src)
	at := time.Date(2026, 11, 27, 9, 35, 16, 0, time.UTC)
	o := newOwnStatusWrites()
	unwritten := func(step string, want bool) {
		t.Helper()
		got, ok := o.unwrittenChange(key)
		if ok != want || ok && !got.Equal(at) {
			t.Errorf("%s: unwrittenChange = %v, %v; want %v", step, got, ok, want)
		}
	}
	unwritten("before any write", false)
	o.notWritten(key, at)
	unwritten("after a status write that did not land", true)
	o.wrote(src, desired.SourceStatus{State: v1alpha1.StatusSynced, Synced: "2/2"})
	unwritten("after a status write that landed", false)
	o.notWritten(key, at)
	o.changeWritten(key)
	unwritten("once the annotations say it", false)
	o.notWritten(key, at)
	o.forget(key)
	unwritten("after the source is forgotten", false)
}
