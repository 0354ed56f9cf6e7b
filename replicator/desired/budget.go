package desired

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultMaxReplicatedBytes is the default of --max-replicated-bytes: half of etcd's
// default backend quota (2 GiB), so that no single source can fill etcd on its own,
// while 1,000 copies of a ConfigMap near its 1 MiB limit still fit.
const DefaultMaxReplicatedBytes = 1 << 30

// Size is the bytes of content each replica carries: its keys and values.
func (t Template[T]) Size() int64 {
	var n int64
	for k, v := range t.content.Text {
		n += int64(len(k) + len(v))
	}
	for k, v := range t.content.Binary {
		n += int64(len(k) + len(v))
	}
	return n
}

// CheckWriteBudget says why a source whose replicas carry size bytes may not be copied
// into targets namespaces under the controller's budget (0: no budget), or nil.
func (p Policy) CheckWriteBudget(size int64, targets int) error {
	total := size * int64(targets)
	if p.MaxReplicatedBytes <= 0 || total <= p.MaxReplicatedBytes {
		return nil
	}
	return fmt.Errorf("the replicas would hold %s (%s in each of %d target namespaces), over the controller's --max-replicated-bytes of %s: "+
		"narrow the targets or the keys, or raise the budget; existing replicas are kept",
		bytesOf(total), bytesOf(size), targets, bytesOf(p.MaxReplicatedBytes))
}

func bytesOf(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}
