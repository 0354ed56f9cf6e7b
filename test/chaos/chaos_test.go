//go:build e2e

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// chaosReport is what a chaos run prints and writes.
type chaosReport struct {
	Seed              uint64  `json:"seed"`
	Kills             int     `json:"kills"`
	LeaderKills       int     `json:"leaderKills"`
	APIServerRestarts int     `json:"apiServerRestarts"`
	Converged         int     `json:"converged"`
	Orphans           int     `json:"orphans"`
	Missing           int     `json:"missing"`
	UnmanagedTouched  int     `json:"unmanagedTouched"`
	WrongStatus       int     `json:"wrongStatus"`
	MedianConvergeSec float64 `json:"medianConvergeSeconds"`
	MaxConvergeSec    float64 `json:"maxConvergeSeconds"`
}

// chaosWorld is the state the cluster must converge to.
type chaosWorld struct {
	srcNS, name string
	group       []string // namespaces a source may target
	blocked     string   // a group namespace holding an unmanaged ConfigMap of the same name
	unmanaged   map[string]string
	exists      bool
	targets     []string
	value       string
}

// TestChaos kills cmsync with SIGKILL at random moments while sources are created,
// updated, retargeted and deleted, and restarts the kube-apiserver during a fan-out;
// after each restart the state must converge exactly: every target has the right
// replica, no orphan remains, no unmanaged ConfigMap changed, and the status tells the
// truth. Then two processes run with leader election and the leader is killed while
// the follower waits: the follower (and a replacement process, as a Deployment would
// start) must take over and converge. CMSYNC_CHAOS_KILLS (default 6, `make chaos`: 100),
// CMSYNC_CHAOS_LEADER_KILLS (default 1, `make chaos`: 5) and CMSYNC_CHAOS_SEED make it
// reproducible.
func TestChaos(t *testing.T) {
	harness.SkipOnExistingCluster(t)
	kills, _ := strconv.Atoi(envOr("CMSYNC_CHAOS_KILLS", "6"))
	leaderKills, _ := strconv.Atoi(envOr("CMSYNC_CHAOS_LEADER_KILLS", "1"))
	seed, _ := strconv.ParseUint(envOr("CMSYNC_CHAOS_SEED", "1"), 10, 64)
	rng := rand.New(rand.NewPCG(seed, seed))
	ctx := context.Background()

	w := &chaosWorld{srcNS: harness.NewNamespace(t, "chaos-src", nil), name: "chaos", unmanaged: map[string]string{}}
	for range 30 {
		w.group = append(w.group, harness.NewNamespace(t, "chaos", nil))
	}
	w.blocked = w.group[0]
	outside := harness.NewNamespace(t, "chaos-outside", nil)
	for _, ns := range []string{w.blocked, outside} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: w.name}, Data: map[string]string{"owner": "someone else"}}
		must(t, harness.K8s.Create(ctx, cm))
		w.unmanaged[ns] = cm.ResourceVersion
	}

	report := chaosReport{Seed: seed}
	var converge []float64
	round := func(action func(), killAfter time.Duration, restartAPIServer bool) {
		c := harness.StartController(t)
		action()
		time.Sleep(killAfter)
		if restartAPIServer {
			restartKubeAPIServer(t)
			report.APIServerRestarts++
		}
		c.Kill()
		report.Kills++
		start := time.Now()
		next := harness.StartController(t)
		ok := w.waitExact(t, &report, 60*time.Second)
		if ok {
			report.Converged++
			converge = append(converge, time.Since(start).Seconds())
		}
		next.Stop()
	}

	// leaderRound runs two processes with leader election, acts, and kills the leader;
	// the follower and a replacement process must take over.
	leaderRound := func(action func(), killAfter time.Duration) {
		a, b := harness.StartController(t, "--leader-elect=true"), harness.StartController(t, "--leader-elect=true")
		var leader, follower *harness.Controller
		eventually(t, 30*time.Second, "a leader elected", func() error {
			switch {
			case isLeader(t, a):
				leader, follower = a, b
			case isLeader(t, b):
				leader, follower = b, a
			default:
				return fmt.Errorf("no leader yet")
			}
			return nil
		})
		action()
		time.Sleep(killAfter)
		leader.Kill()
		report.Kills++
		report.LeaderKills++
		start := time.Now()
		replacement := harness.StartController(t, "--leader-elect=true")
		// The lease (15s) must expire before the follower may lead.
		converged := w.waitExact(t, &report, 90*time.Second)
		took := time.Since(start).Seconds()
		// The state may have been exact before the kill; a new leader must come anyway,
		// and the state must stay exact under it.
		eventually(t, 30*time.Second, "a new leader", func() error {
			if !isLeader(t, follower) && !isLeader(t, replacement) {
				return fmt.Errorf("neither the follower nor the replacement leads")
			}
			return nil
		})
		if converged && w.waitExact(t, &report, 30*time.Second) {
			report.Converged++
			converge = append(converge, took)
		}
		follower.Stop()
		replacement.Stop()
	}

	for i := range kills + leaderKills {
		killAfter := time.Duration(rng.IntN(600)) * time.Millisecond
		do := round
		if i >= kills {
			do = func(action func(), killAfter time.Duration, _ bool) { leaderRound(action, killAfter) }
		}
		switch op := rng.IntN(3); {
		case !w.exists: // create: a fan-out
			do(func() { w.create(t, rng) }, killAfter, false)
		case op == 0: // update
			do(func() { w.update(t, strconv.Itoa(i)) }, killAfter, false)
		case op == 1: // retarget: some namespaces gained, some lost
			do(func() { w.retarget(t, rng) }, killAfter, false)
		default: // delete: a cleanup
			do(func() { w.delete(t) }, killAfter, false)
		}
	}
	if w.exists {
		w.delete(t)
	}
	// The kube-apiserver restarts in the middle of a fan-out.
	round(func() { w.create(t, rng) }, 300*time.Millisecond, true)

	// Leave nothing for the scenarios after this one.
	last := harness.StartController(t)
	w.delete(t)
	harness.WaitForReplicas(t, w.srcNS, w.name, 60*time.Second)
	last.Stop()

	sort.Float64s(converge)
	if len(converge) > 0 {
		report.MedianConvergeSec = converge[len(converge)/2]
		report.MaxConvergeSec = converge[len(converge)-1]
	}
	data, _ := json.MarshalIndent(report, "", "  ")
	t.Logf("chaos: %s", data)
	if dir := os.Getenv("CMSYNC_CHAOS_OUT"); dir != "" {
		must(t, os.MkdirAll(dir, 0o755))
		must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("chaos-%s.json", time.Now().UTC().Format("20060102-150405"))), data, 0o644))
	}
	if report.Converged != report.Kills || report.Orphans+report.Missing+report.UnmanagedTouched+report.WrongStatus != 0 {
		t.Errorf("chaos run did not converge exactly: %s", data)
	}
}

func (w *chaosWorld) create(t *testing.T, rng *rand.Rand) {
	w.targets = w.randomTargets(rng)
	w.value = "v" + randomSuffix()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.srcNS, Name: w.name,
		Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
		Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: strings.Join(w.targets, ",")}},
		Data: map[string]string{"v": w.value}}
	must(t, harness.K8s.Create(context.Background(), cm))
	w.exists = true
}

func (w *chaosWorld) update(t *testing.T, value string) {
	w.value = value
	w.patchSource(t, fmt.Sprintf(`{"data":{"v":%q}}`, value))
}

func (w *chaosWorld) retarget(t *testing.T, rng *rand.Rand) {
	w.targets = w.randomTargets(rng)
	w.patchSource(t, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.TargetNamespacesAnnotation, strings.Join(w.targets, ",")))
}

func (w *chaosWorld) delete(t *testing.T) {
	must(t, harness.K8s.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.srcNS, Name: w.name}}))
	w.exists, w.targets = false, nil
}

func (w *chaosWorld) patchSource(t *testing.T, patch string) {
	_, err := harness.Clientset.CoreV1().
		ConfigMaps(w.srcNS).
		Patch(context.Background(), w.name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
	must(t, err)
}

// randomTargets picks between 5 and all of the group, sometimes including the blocked one.
func (w *chaosWorld) randomTargets(rng *rand.Rand) []string {
	picked := slices.Clone(w.group)
	rng.Shuffle(len(picked), func(i, j int) { picked[i], picked[j] = picked[j], picked[i] })
	picked = picked[:5+rng.IntN(len(picked)-4)]
	sort.Strings(picked)
	return picked
}

// waitExact waits for the exact state and, when it does not come, counts what is wrong.
func (w *chaosWorld) waitExact(t *testing.T, report *chaosReport, timeout time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		orphans, missing, touched, wrongStatus := w.diff(t)
		if orphans+missing+touched+wrongStatus == 0 {
			return true
		}
		if time.Now().After(deadline) || touched > 0 {
			report.Orphans += orphans
			report.Missing += missing
			report.UnmanagedTouched += touched
			report.WrongStatus += wrongStatus
			t.Logf("not converged: %d orphans, %d missing, %d unmanaged touched, status wrong: %d", orphans, missing, touched, wrongStatus)
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (w *chaosWorld) diff(t *testing.T) (orphans, missing, touched, wrongStatus int) {
	want := map[string]bool{}
	for _, ns := range w.targets {
		if ns != w.blocked {
			want[ns] = true
		}
	}
	got := map[string]bool{}
	for _, ns := range harness.ReplicasOf(t, w.srcNS, w.name) {
		got[ns] = true
		if !want[ns] {
			orphans++
		}
	}
	for ns := range want {
		r, err := harness.GetConfigMap(ns, w.name)
		if !got[ns] || err != nil || r.Data["v"] != w.value {
			missing++
		}
	}
	for ns, rv := range w.unmanaged {
		cm, err := harness.GetConfigMap(ns, w.name)
		if err != nil || cm.ResourceVersion != rv {
			touched++
		}
	}
	if w.exists {
		src, err := harness.GetConfigMap(w.srcNS, w.name)
		if err != nil {
			return orphans, missing, touched, 1
		}
		state, synced := v1alpha1.StatusSynced, fmt.Sprintf("%d/%d", len(want), len(w.targets))
		if len(want) != len(w.targets) {
			state = v1alpha1.StatusDegraded
		}
		if src.Annotations[v1alpha1.StatusAnnotation] != state || src.Annotations[v1alpha1.SyncedAnnotation] != synced {
			wrongStatus++
		}
	} else if _, err := harness.GetConfigMap(w.srcNS, w.name); !apierrors.IsNotFound(err) {
		wrongStatus++
	}
	return orphans, missing, touched, wrongStatus
}

// restartKubeAPIServer stops the running kube-apiserver and starts it again with the
// same arguments, certificates and etcd, as a real restart would.
func restartKubeAPIServer(t *testing.T) {
	t.Helper()
	pid, args := harness.FindProcess(t, "kube-apiserver")
	harness.Terminate(t, pid)
	restarted := harness.StartProcess(t, args)
	harness.APIServerRestarts = append(harness.APIServerRestarts, restarted)
	// Ready, not just answering: until its informers (RBAC's among them) have synced,
	// a starting API server refuses requests its authorizer would allow.
	eventually(t, 60*time.Second, "kube-apiserver ready", func() error {
		_, err := harness.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err
	})
	// cmsync is started again at once, while discovery may still fail: it must wait for
	// the API server rather than exit.
}

// isLeader tells whether the process holds the leader election lease.
func isLeader(_ *testing.T, c *harness.Controller) bool { return leads(c) }

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}
