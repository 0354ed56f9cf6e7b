package replicator

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// inSyncVerdicts remembers the replicas a pass read whole and found in sync: by UID,
// the resourceVersion read and the fingerprint of the template it was compared with
// (desired.Template.Fingerprint). A replica whose metadata cannot tell whether it is in
// sync (desired.Template.DiffMetadata: one the replica store keeps compacted, or whose
// content another manager wrote) is then read again only once it or its template has
// changed, not on every pass of its owner: a source of many thousands of keys costs its
// passes one read per changed replica, as any other. Any write of the replica changes
// its resourceVersion, so a verdict never outlives what it judged. Bounded: when full,
// it starts over (a verdict lost costs one read). Only replicas read whole are recorded
// (those the store keeps compacted, those whose content another manager wrote), not the
// ones whose metadata tells.
type inSyncVerdicts struct {
	mu sync.Mutex
	m  map[types.UID]inSyncVerdict
}

type inSyncVerdict struct {
	version, template string
}

const maxInSyncVerdicts = 1 << 16

// holds reports whether replica, as it is now, was found in sync with template.
func (v *inSyncVerdicts) holds(replica metav1.Object, template string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	got, ok := v.m[replica.GetUID()]
	return ok && got.version == replica.GetResourceVersion() && got.template == template
}

// record keeps that replica, as read, is in sync with template.
func (v *inSyncVerdicts) record(replica metav1.Object, template string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil || len(v.m) >= maxInSyncVerdicts {
		v.m = make(map[types.UID]inSyncVerdict)
	}
	v.m[replica.GetUID()] = inSyncVerdict{version: replica.GetResourceVersion(), template: template}
}
