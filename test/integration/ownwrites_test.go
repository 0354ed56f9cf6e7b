package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// While the replica cache trails cmsync's own writes — their events arrive one by one
// and the first of them queues the next pass — each replica is written once per
// change: the fan-out creates each replica once, the update writes each once, the
// cleanup deletes each once. Read from the cache alone, the next pass created the
// replicas again (409), updated them from the version already replaced (409) and
// deleted them again (404), each a request the API server serves from etcd.
func TestOwnWritesAreNotRepeatedWhileTheCacheTrails(t *testing.T) {
	running := startController(t)
	srcNS := newNamespace(t, "src", nil)
	// The caches have listed once a source is synced; from then on the replica watch
	// is slow.
	warm := newSource(t, srcNS, "warm-up", map[string]string{v1alpha1.TargetNamespacesAnnotation: newNamespace(t, "dst", nil)}, nil)
	waitForSynced(t, warm, "1/1")
	running.TrickleReplicaEvents()

	const n = 30
	group, targets := newGroup(t, "trail", n)
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetSelectorAnnotation: "group=" + group}, map[string]string{"k": "v1"})
	waitForReplicasIn(t, src, targets...)
	waitForSynced(t, src, "30/30")
	writesOnce(t, running, "the fan-out", targets, http.MethodPost)

	update(t, src, func(cm *corev1.ConfigMap) { cm.Data["k"] = "v2" })
	waitForUpdated(t, targets, "app", "v2")
	writesOnce(t, running, "the update", targets, http.MethodPut, http.MethodPatch)

	must(t, k8s.Delete(context.Background(), src))
	waitForReplicasIn(t, src)
	writesOnce(t, running, "the cleanup", targets, http.MethodDelete)
}

// waitForUpdated waits until the replica named name in each target holds k=v.
func waitForUpdated(t *testing.T, targets []string, name, v string) {
	t.Helper()
	eventually(t, timeout, "every replica updated", func() error {
		for _, ns := range targets {
			r, err := getConfigMap(ns, name)
			if err != nil {
				return err
			}
			if r.Data["k"] != v {
				return errorf("%s still has k=%q", ns, r.Data["k"])
			}
		}
		return nil
	})
}

// writesOnce checks, for as long as the trickling watch takes to bring a pass's
// events back and the passes they queue to run, that the controller has sent one
// write of these methods into each target namespace, in total.
func writesOnce(t *testing.T, c *controllerUnderTest, what string, targets []string, methods ...string) {
	t.Helper()
	consistently(t, 4*time.Second, what+": one write per replica", func() error {
		got := 0
		for _, m := range methods {
			got += c.WritesIn(m, targets...)
		}
		if got != len(targets) {
			return errorf("%d %v requests into %d target namespaces; last writes:\n%s", got, methods, len(targets), c.LastWrites())
		}
		return nil
	})
}

// The echoes of a pass's own writes queue no further pass: the pass that wrote the
// replicas counted them. Queued by them, a pass ran while the source cache had not yet
// seen the first pass's status write, and wrote the status again from the older copy
// (answered 409, and retried until the cache caught up); after a cleanup, each pass
// they queued read the deleted source again. Here the replica watch trickles and the
// source watch lags, so that each phase's echoes arrive after its pass and before the
// source cache has its status.
func TestEchoesOfOwnWritesQueueNoPass(t *testing.T) {
	running := startControllerBehind(t, 500*time.Millisecond)
	warm := newSource(t, newNamespace(t, "src", nil), "warm-up", map[string]string{v1alpha1.TargetNamespacesAnnotation: newNamespace(t, "dst", nil)}, nil)
	waitForSynced(t, warm, "1/1")
	running.TrickleReplicaEvents()
	srcNS := newNamespace(t, "src", nil) // the source's own: its status writes alone
	statusWrites := func() int { return running.WritesIn(http.MethodPatch, srcNS) }
	before := statusWrites()

	const n = 20
	group, targets := newGroup(t, "echo", n)
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetSelectorAnnotation: "group=" + group}, map[string]string{"k": "v1"})
	waitForSynced(t, src, "20/20")
	writesOnce(t, running, "the fan-out", targets, http.MethodPost)
	if got := statusWrites() - before; got != 1 {
		t.Fatalf("the fan-out: %d status writes onto the sources' namespace, want 1; last writes:\n%s", got, running.LastWrites())
	}

	before = statusWrites()
	update(t, src, func(cm *corev1.ConfigMap) { cm.Data["k"] = "v2" })
	waitForUpdated(t, targets, "app", "v2")
	writesOnce(t, running, "the update", targets, http.MethodPut, http.MethodPatch)
	if got := statusWrites() - before; got != 1 {
		t.Fatalf("the update: %d status writes onto the sources' namespace, want 1; last writes:\n%s", got, running.LastWrites())
	}

	readsBefore := sourceReads(running, src)
	must(t, k8s.Delete(context.Background(), src))
	waitForReplicasIn(t, src)
	readOnce(t, running, src, readsBefore)
}

// A delete's echo can reach the replica cache before the delete's answer reaches
// cmsync, most of all under load; it is known for the delete's echo all the same, since
// the engine records a delete before sending it. Here every delete's answer arrives
// after its event.
func TestEchoesThatOutrunTheirAnswersQueueNoPass(t *testing.T) {
	running := startController(t)
	srcNS := newNamespace(t, "src", nil)
	group, targets := newGroup(t, "outrun", 10)
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetSelectorAnnotation: "group=" + group}, map[string]string{"k": "v1"})
	waitForReplicasIn(t, src, targets...)
	waitForSynced(t, src, "10/10")
	running.SlowAnswers(func(req *http.Request) bool {
		return req.Method == http.MethodDelete && !strings.Contains(req.URL.Path, "/namespaces/"+srcNS+"/")
	})

	readsBefore := sourceReads(running, src)
	must(t, k8s.Delete(context.Background(), src))
	waitForReplicasIn(t, src)
	writesOnce(t, running, "the cleanup", targets, http.MethodDelete)
	readOnce(t, running, src, readsBefore)
}

// readOnce checks, for as long as late events take to queue passes, that the
// controller read the deleted source src once since it had read it before times: in
// the pass that deleted its replicas (a source gone from the cache may only have lost
// its label, and then keeps status annotations to take off). Each pass the echoes of
// its deletes queued read it again.
func readOnce(t *testing.T, c *controllerUnderTest, src *corev1.ConfigMap, before int) {
	t.Helper()
	readsAre := func(want string, check func(int) bool) func() error {
		return func() error {
			if reads := sourceReads(c, src) - before; !check(reads) {
				return errorf("%d reads of the deleted source, want %s", reads, want)
			}
			return nil
		}
	}
	// The pass reads the source after deleting the replicas.
	eventually(t, timeout, "the read of the deleted source", readsAre("at least 1", func(n int) bool { return n > 0 }))
	consistently(t, 3*time.Second, "one read of the deleted source", readsAre("1", func(n int) bool { return n == 1 }))
}

// sourceReads counts the controller's reads of the source src: a pass reads it whole
// once for each version it has not read yet, and once more to retire it.
func sourceReads(c *controllerUnderTest, src *corev1.ConfigMap) int {
	reads := 0
	for _, path := range c.ObjectReadsIn(src.Namespace) {
		if strings.HasSuffix(path, "/configmaps/"+src.Name) {
			reads++
		}
	}
	return reads
}
