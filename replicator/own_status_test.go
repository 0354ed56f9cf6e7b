package replicator

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// Only the very copy a status write replaced, read with the status that write said,
// counts as already saying it; another version, another status, another owner or a
// forgotten owner does not.
func TestOwnStatusKnowsTheCopyItsWriteReplaced(t *testing.T) {
	app, other := types.NamespacedName{Namespace: "p", Name: "app"}, types.NamespacedName{Namespace: "q", Name: "app"}
	synced := desired.SourceStatus{State: v1alpha1.StatusSynced, Synced: "3/3", Message: "in sync in 3 namespaces"}
	degraded := desired.SourceStatus{State: v1alpha1.StatusDegraded, Synced: "2/3", Message: "conflict in b"}

	o := newOwnStatus(func(a, b desired.SourceStatus) bool { return a == b })
	if o.alreadySays(app, "10", synced) {
		t.Fatal("a source never written already says its status")
	}
	o.wrote(app, "10", synced)
	for _, c := range []struct {
		what    string
		owner   types.NamespacedName
		version string
		status  desired.SourceStatus
		want    bool
	}{
		{"the copy replaced, the status written", app, "10", synced, true},
		{"the copy replaced, another status", app, "10", degraded, false},
		{"a newer copy", app, "11", synced, false},
		{"another source of the same version", other, "10", synced, false},
	} {
		if got := o.alreadySays(c.owner, c.version, c.status); got != c.want {
			t.Errorf("%s: alreadySays = %v, want %v", c.what, got, c.want)
		}
	}
	o.forget(app)
	if o.alreadySays(app, "10", synced) {
		t.Error("a forgotten source still says its status")
	}
}

// The time of a change whose status write did not land is kept until a status write
// lands, and given to the passes after it that change nothing themselves; a pass's own
// change gives its own time; the record goes with the owner.
func TestOwnStatusKeepsTheTimeOfAnUnwrittenChange(t *testing.T) {
	owner := types.NamespacedName{Namespace: "p", Name: "app"}
	changedAt := time.Date(2026, 11, 27, 9, 35, 16, 0, time.UTC)
	now := changedAt.Add(2 * time.Second)
	refused := errors.New("conflict")
	u := newOwnStatus(func(a, b desired.SourceStatus) bool { return a == b })
	expect := func(step string, passChanged bool, wantAt time.Time, wantChanged bool) {
		t.Helper()
		if at, changed := u.lastChange(owner, passChanged, now); changed != wantChanged || changed && !at.Equal(wantAt) {
			t.Errorf("%s: lastChange = %v, %v; want %v, %v", step, at, changed, wantAt, wantChanged)
		}
	}
	expect("nothing changed yet", false, time.Time{}, false)
	expect("a pass that changes", true, now, true)
	u.settle(owner, true, changedAt, refused)
	expect("after a change whose status write was refused", false, changedAt, true)
	expect("a pass that changes again", true, now, true)
	u.settle(owner, false, time.Time{}, refused)
	expect("after a refused write of a pass that changed nothing", false, changedAt, true)
	u.settle(owner, true, changedAt, nil)
	expect("after the write that gave it", false, time.Time{}, false)
	u.settle(owner, true, changedAt, refused)
	u.forget(owner)
	expect("after the owner is forgotten", false, time.Time{}, false)
}
