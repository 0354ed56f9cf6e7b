package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

func newSync(t *testing.T, spec v1alpha1.ConfigMapSyncSpec) *v1alpha1.ConfigMapSync {
	t.Helper()
	sync := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "sync-" + randomSuffix()}, Spec: spec}
	must(t, k8s.Create(context.Background(), sync))
	return sync
}

func plainConfigMap(t *testing.T, namespace, name string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
	must(t, k8s.Create(context.Background(), cm))
	return cm
}

// waitForReady waits for the Ready condition to have status and reason, and returns
// the ConfigMapSync or SecretSync as the server has it.
func waitForReady[S v1alpha1.Sync](t *testing.T, sync S, status metav1.ConditionStatus, reason string) S {
	t.Helper()
	return waitForReadyCount(t, sync, status, reason, "")
}

// waitForReadyCount is waitForReady that also waits for the synced count (any when "").
func waitForReadyCount[S v1alpha1.Sync](t *testing.T, sync S, status metav1.ConditionStatus, reason, synced string) S {
	t.Helper()
	var got S
	eventually(t, timeout, "Ready of "+sync.GetName(), func() error {
		got = newLike(sync)
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sync), got); err != nil {
			return err
		}
		st := got.SyncStatus()
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != status || c.Reason != reason || st.ObservedGeneration != got.GetGeneration() ||
			(synced != "" && st.Synced != synced) {
			return fmt.Errorf("Ready %+v, synced %q (observed %d of %d), want %s/%s %s",
				c, st.Synced, st.ObservedGeneration, got.GetGeneration(), status, reason, synced)
		}
		return nil
	})
	return got
}

// replicasOfSync lists the namespaces holding a replica owned by the ConfigMapSync.
func replicasOfSync(t *testing.T, sync *v1alpha1.ConfigMapSync) []string {
	t.Helper()
	var list corev1.ConfigMapList
	must(t, k8s.List(context.Background(), &list, client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}))
	var namespaces []string
	for _, cm := range list.Items {
		for _, ref := range cm.OwnerReferences {
			if ref.Kind == "ConfigMapSync" && ref.Name == sync.Name && ref.UID == sync.UID {
				namespaces = append(namespaces, cm.Namespace)
			}
		}
	}
	return namespaces
}

func waitForSyncReplicasIn(t *testing.T, sync *v1alpha1.ConfigMapSync, want ...string) {
	t.Helper()
	eventually(t, timeout, "replicas of "+sync.Name, func() error {
		if got := replicasOfSync(t, sync); !sameSet(got, want) {
			return fmt.Errorf("replicas in %v, want %v", got, want)
		}
		return nil
	})
}

// tutorialSync is the tutorial's ConfigMapSync: ca-bundle (ca.crt: pem) copied from a
// new namespace to another, once its replica is there.
func tutorialSync(t *testing.T) (srcNS, dst string, sync *v1alpha1.ConfigMapSync) {
	t.Helper()
	srcNS, dst = newNamespace(t, "src", nil), newNamespace(t, "dst", nil)
	plainConfigMap(t, srcNS, "ca-bundle", map[string]string{"ca.crt": "pem"})
	sync = newSync(
		t,
		v1alpha1.ConfigMapSyncSpec{SourceNamespace: srcNS, ConfigMapName: "ca-bundle", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}},
	)
	waitForSyncReplicasIn(t, sync, dst)
	return srcNS, dst, sync
}

// The original tutorial form works unchanged, and the printer columns show source,
// synced/targets and Ready.
func TestConfigMapSyncTutorialForm(t *testing.T) {
	startController(t)
	srcNS, dst, sync := tutorialSync(t)
	got := waitForReady(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced)
	if got.Status.TargetNamespaces != 1 || got.Status.SyncedNamespaces != 1 || got.Status.LastSyncTime == nil {
		t.Errorf("status %+v", got.Status)
	}
	replica, err := getConfigMap(dst, "ca-bundle")
	must(t, err)
	if replica.Data["ca.crt"] != "pem" || replica.Annotations[v1alpha1.SourceAnnotation] != srcNS+"/ca-bundle" ||
		replica.Labels[v1alpha1.ManagedByLabel] != "cmsync" {
		t.Errorf("replica %+v", replica.ObjectMeta)
	}

	// What kubectl get cms prints: the server-side table of the CRD's printer columns.
	clientset, err := kubernetes.NewForConfig(restConfig)
	must(t, err)
	raw, err := clientset.RESTClient().Get().AbsPath("/apis/cmsync.io/v1alpha1/configmapsyncs", sync.Name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	must(t, err)
	var table metav1.Table
	must(t, json.Unmarshal(raw, &table))
	columns := make([]string, 0, len(table.ColumnDefinitions))
	for _, c := range table.ColumnDefinitions {
		columns = append(columns, c.Name)
	}
	if strings.Join(columns, ",") != "Name,Source,Synced,Ready,Age" || len(table.Rows) != 1 {
		t.Fatalf("columns %v rows %d", columns, len(table.Rows))
	}
	cells := fmt.Sprint(table.Rows[0].Cells[:4])
	if want := fmt.Sprint([]any{sync.Name, srcNS + "/ca-bundle", "1/1", "True"}); cells != want {
		t.Errorf("row %s, want %s", cells, want)
	}
}

// A ConfigMapSync's replica edited or deleted by hand is put back, as a source's is
// (TestRepairsDrift): its controller sees the replica's events as well as the source
// controller does.
func TestConfigMapSyncRepairsDrift(t *testing.T) {
	startController(t)
	_, dst, sync := tutorialSync(t)
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "1/1")
	restored := func() error {
		r, err := getConfigMap(dst, "ca-bundle")
		if err != nil {
			return err
		}
		return expectEqualContent(r, map[string]string{"ca.crt": "pem"}, nil, nil, nil)
	}

	replica := &corev1.ConfigMap{}
	replica.Namespace, replica.Name = dst, "ca-bundle"
	update(t, replica, func(cm *corev1.ConfigMap) { cm.Data["ca.crt"] = "tampered" })
	eventually(t, timeout, "edited replica restored", restored)

	must(t, k8s.Delete(context.Background(), replica))
	eventually(t, timeout, "deleted replica recreated", restored)
	waitForSyncReplicasIn(t, sync, dst)
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "1/1")
}

// A missing source is reported as SourceNotFound; when it appears, replicas follow,
// and so do later changes of its data.
func TestConfigMapSyncSourceLifecycle(t *testing.T) {
	startController(t)
	srcNS, dst := newNamespace(t, "src", nil), newNamespace(t, "dst", nil)
	sync := newSync(t, v1alpha1.ConfigMapSyncSpec{SourceNamespace: srcNS, ConfigMapName: "late", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}})
	got := waitForReady(t, sync, metav1.ConditionFalse, v1alpha1.ReasonSourceNotFound)
	if msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, srcNS+"/late not found") {
		t.Errorf("message %q", msg)
	}
	src := plainConfigMap(t, srcNS, "late", map[string]string{"v": "1"})
	waitForSyncReplicasIn(t, sync, dst)
	waitForReady(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced)
	update(t, src, func(cm *corev1.ConfigMap) { cm.Data["v"] = "2" })
	eventually(t, timeout, "replica follows the source", func() error {
		r, err := getConfigMap(dst, "late")
		if err != nil {
			return err
		}
		return expectEqualContent(r, map[string]string{"v": "2"}, nil, nil, nil)
	})
	if got := srcLabels(t, srcNS, "late"); len(got) != 0 {
		t.Errorf("the source was labelled by cmsync: %v", got)
	}
}

func srcLabels(t *testing.T, ns, name string) map[string]string {
	cm, err := getConfigMap(ns, name)
	must(t, err)
	return cm.Labels
}

// syncIntoTwoOfThree starts cmsync and a ConfigMapSync of the source ConfigMap "app"
// in srcNS into namespaces a and b (c is left out), and waits for both replicas.
func syncIntoTwoOfThree(t *testing.T) (sync *v1alpha1.ConfigMapSync, srcNS, a, b, c string) {
	t.Helper()
	startController(t)
	srcNS = newNamespace(t, "src", nil)
	a, b, c = newNamespace(t, "dst", nil), newNamespace(t, "dst", nil), newNamespace(t, "dst", nil)
	plainConfigMap(t, srcNS, "app", map[string]string{"k": "v"})
	sync = newSync(
		t,
		v1alpha1.ConfigMapSyncSpec{
			SourceNamespace: srcNS,
			ConfigMapName:   "app",
			ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespace: a, DestinationNamespaces: []string{b}},
		},
	)
	waitForSyncReplicasIn(t, sync, a, b)
	return sync, srcNS, a, b, c
}

// Spec edits add and remove targets exactly; namespaceSelector picks up namespaces
// created later; "!" entries exclude from the union.
func TestConfigMapSyncTargetsFollowSpec(t *testing.T) {
	sync, srcNS, a, _, c := syncIntoTwoOfThree(t)

	update(t, sync, func(s *v1alpha1.ConfigMapSync) { s.Spec.DestinationNamespaces = []string{c} })
	waitForSyncReplicasIn(t, sync, a, c)

	group := "g" + randomSuffix()
	update(t, sync, func(s *v1alpha1.ConfigMapSync) {
		s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"group": group}}
	})
	later := newNamespace(t, "later", map[string]string{"group": group})
	excluded := newNamespace(t, "excluded", map[string]string{"group": group})
	update(t, sync, func(s *v1alpha1.ConfigMapSync) { s.Spec.DestinationNamespaces = []string{c, "!" + excluded} })
	waitForSyncReplicasIn(t, sync, a, c, later)
	// Ready for the current generation counts its three targets (it once read "4/4": a
	// status patch built on a stale cached copy; TestConfigMapSyncStatusIsOnePassView).
	got := waitForReady(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced)
	if got.Status.Synced != "3/3" {
		t.Errorf("synced %q", got.Status.Synced)
	}

	// Naming another source moves the replicas: the old ones are deleted.
	plainConfigMap(t, srcNS, "other", map[string]string{"k": "o"})
	update(t, sync, func(s *v1alpha1.ConfigMapSync) { s.Spec.ConfigMapName = "other" })
	eventually(t, timeout, "replicas of the newly named source only", func() error {
		for _, ns := range []string{a, c, later} {
			if _, err := getConfigMap(ns, "app"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("replica of the old source in %s: %v", ns, err)
			}
			if _, err := getConfigMap(ns, "other"); err != nil {
				return err
			}
		}
		return nil
	})
}

// Deleting a ConfigMapSync removes its replicas and only its replicas, without a
// garbage collector (envtest runs none).
func TestConfigMapSyncDeletionRemovesOnlyItsReplicas(t *testing.T) {
	startController(t)
	srcNS, dst := newNamespace(t, "src", nil), newNamespace(t, "dst", nil)
	plainConfigMap(t, srcNS, "one", nil)
	plainConfigMap(t, srcNS, "two", nil)
	bystanderCM := plainConfigMap(t, dst, "unrelated", map[string]string{"k": "v"})
	doomed := newSync(t, v1alpha1.ConfigMapSyncSpec{SourceNamespace: srcNS, ConfigMapName: "one", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}})
	kept := newSync(t, v1alpha1.ConfigMapSyncSpec{SourceNamespace: srcNS, ConfigMapName: "two", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}})
	waitForSyncReplicasIn(t, doomed, dst)
	waitForSyncReplicasIn(t, kept, dst)

	must(t, k8s.Delete(context.Background(), doomed))
	eventually(t, timeout, "ConfigMapSync and its replica gone", func() error {
		if _, err := getConfigMap(dst, "one"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("replica still there: %v", err)
		}
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(doomed), &v1alpha1.ConfigMapSync{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("ConfigMapSync still there: %v", err)
		}
		return nil
	})
	consistently(t, 2*time.Second, "other objects untouched", func() error {
		if got := replicasOfSync(t, kept); len(got) != 1 {
			return fmt.Errorf("the other ConfigMapSync's replicas: %v", got)
		}
		cm, err := getConfigMap(dst, "unrelated")
		if err != nil || cm.ResourceVersion != bystanderCM.ResourceVersion {
			return fmt.Errorf("unrelated ConfigMap changed: %v", err)
		}
		return nil
	})
}

// An invalid spec is refused at admission with a message the user sees; what the schema
// cannot express is reported Invalid.
func TestConfigMapSyncValidation(t *testing.T) {
	startController(t)
	ns := newNamespace(t, "src", nil)
	refused := []struct {
		name    string
		spec    v1alpha1.ConfigMapSyncSpec
		message string
	}{
		{
			"missing configMapName",
			v1alpha1.ConfigMapSyncSpec{SourceNamespace: ns, ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: "a"}},
			"spec.configMapName",
		},
		{
			"missing sourceNamespace",
			v1alpha1.ConfigMapSyncSpec{ConfigMapName: "x", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: "a"}},
			"spec.sourceNamespace",
		},
		{"no targets", v1alpha1.ConfigMapSyncSpec{SourceNamespace: ns, ConfigMapName: "x"}, "set destinationNamespace, destinationNamespaces"},
		{
			"only exclusions",
			v1alpha1.ConfigMapSyncSpec{SourceNamespace: ns, ConfigMapName: "x", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespaces: []string{"!a"}}},
			"set destinationNamespace, destinationNamespaces",
		},
		{
			"copy onto itself",
			v1alpha1.ConfigMapSyncSpec{SourceNamespace: ns, ConfigMapName: "x", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: ns}},
			"must differ from sourceNamespace",
		},
		{
			"upper-case name",
			v1alpha1.ConfigMapSyncSpec{SourceNamespace: ns, ConfigMapName: "X", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: "a"}},
			"spec.configMapName",
		},
		{
			"bad namespace",
			v1alpha1.ConfigMapSyncSpec{SourceNamespace: "Bad_NS", ConfigMapName: "x", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: "a"}},
			"spec.sourceNamespace",
		},
		{
			"bad glob characters",
			v1alpha1.ConfigMapSyncSpec{SourceNamespace: ns, ConfigMapName: "x", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespaces: []string{"team_a"}}},
			"spec.destinationNamespaces[0]",
		},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			sync := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "bad-" + randomSuffix()}, Spec: tc.spec}
			err := k8s.Create(context.Background(), sync)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("create error %v, want Invalid mentioning %q", err, tc.message)
			}
			t.Logf("refused as the user sees it: %v", err)
		})
	}
	reported := []struct {
		name    string
		spec    v1alpha1.ConfigMapSyncSpec
		message string
	}{
		{
			"malformed glob",
			v1alpha1.ConfigMapSyncSpec{SourceNamespace: ns, ConfigMapName: "x", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespaces: []string{"team-[a"}}},
			"malformed glob",
		},
		{
			"bad selector operator",
			v1alpha1.ConfigMapSyncSpec{SourceNamespace: ns, ConfigMapName: "x", ReplicaSpec: v1alpha1.ReplicaSpec{NamespaceSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near", Values: []string{"x"}}},
			}}},
			"spec.namespaceSelector",
		},
	}
	for _, tc := range reported {
		t.Run(tc.name, func(t *testing.T) {
			sync := newSync(t, tc.spec)
			got := waitForReady(t, sync, metav1.ConditionFalse, v1alpha1.ReasonInvalid)
			if msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, tc.message) {
				t.Errorf("message %q, want %q", msg, tc.message)
			}
			waitForEvent(t, sync, v1alpha1.ReasonInvalid, tc.message)
		})
	}
}

// One owner per replica: between an annotated source and a ConfigMapSync, or two
// ConfigMapSyncs, the first keeps the replica and the other reports the conflict;
// nothing flaps.
func TestFrontDoorsNeverShareAReplica(t *testing.T) {
	running := startController(t)
	srcNS := newNamespace(t, "src", nil)
	first, second := newNamespace(t, "dst", nil), newNamespace(t, "dst", nil)

	// The annotated source comes first in one namespace...
	src := newSource(t, srcNS, "shared", map[string]string{v1alpha1.TargetNamespacesAnnotation: first}, map[string]string{"k": "v"})
	waitForReplicasIn(t, src, first)
	// ...a ConfigMapSync first in the other.
	syncA := newSync(
		t,
		v1alpha1.ConfigMapSyncSpec{SourceNamespace: srcNS, ConfigMapName: "shared", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: second}},
	)
	waitForSyncReplicasIn(t, syncA, second)
	waitForReady(t, syncA, metav1.ConditionTrue, v1alpha1.ReasonSynced)

	// Now each wants the other's namespace too, and a second ConfigMapSync wants both.
	update(t, src, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.TargetNamespacesAnnotation] = first + "," + second })
	update(t, syncA, func(s *v1alpha1.ConfigMapSync) { s.Spec.DestinationNamespaces = []string{first} })
	syncB := newSync(
		t,
		v1alpha1.ConfigMapSyncSpec{
			SourceNamespace: srcNS,
			ConfigMapName:   "shared",
			ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespaces: []string{first, second}},
		},
	)

	degraded := waitForStatus(t, src, v1alpha1.StatusDegraded)
	if msg := degraded.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "conflict in "+second) ||
		!strings.Contains(msg, "ConfigMapSync "+syncA.Name) {
		t.Errorf("annotated source message %q", msg)
	}
	for _, s := range []*v1alpha1.ConfigMapSync{syncA, syncB} {
		got := waitForReady(t, s, metav1.ConditionFalse, v1alpha1.ReasonDegraded)
		failed := make([]string, 0, len(got.Status.FailedNamespaces))
		for _, f := range got.Status.FailedNamespaces {
			if f.Reason != v1alpha1.ReasonConflict {
				t.Errorf("%s: failed namespace %+v", s.Name, f)
			}
			failed = append(failed, f.Namespace)
		}
		want := []string{first}
		if s == syncB {
			want = []string{first, second}
		}
		if !sameSet(failed, want) {
			t.Errorf("%s: failedNamespaces %v, want %v", s.Name, failed, want)
		}
	}
	waitForReplicasIn(t, src, first)
	waitForSyncReplicasIn(t, syncA, second)
	waitForSyncReplicasIn(t, syncB)

	// Several conflict rechecks pass: nobody writes.
	time.Sleep(2 * time.Second)
	before := running.Writes()
	consistently(t, 5*time.Second, "no flapping between owners", func() error {
		if w := running.Writes() - before; w != 0 {
			return fmt.Errorf("%d writes; last:\n%s", w, running.LastWrites())
		}
		return nil
	})

	// The annotated source gives up the namespace it lost, and the first ConfigMapSync
	// goes away: the second takes its namespace over.
	update(t, src, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.TargetNamespacesAnnotation] = first })
	waitForSynced(t, src, "1/1")
	must(t, k8s.Delete(context.Background(), syncA))
	waitForSyncReplicasIn(t, syncB, second)
	must(t, k8s.Delete(context.Background(), syncB))
	must(t, k8s.Delete(context.Background(), src))
}

// Every status the API server ever holds is one a single pass computed: the count of
// the targets of the generation it names. A status patch computed from a stale cached
// copy leaves out what the copy already had, and so once paired the count of one
// generation with the next's (Ready "4/4" for a spec with three targets). The spec
// flips quickly so that passes start before the previous pass's status is cached.
func TestConfigMapSyncStatusIsOnePassView(t *testing.T) {
	sync, _, _, b, c := syncIntoTwoOfThree(t)

	watcher, err := client.NewWithWatch(restConfig, client.Options{Scheme: newScheme()})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := watcher.Watch(ctx, &v1alpha1.ConfigMapSyncList{}, client.MatchingFields{"metadata.name": sync.Name})
	must(t, err)
	defer w.Stop()
	seen := make(chan v1alpha1.SyncStatus, 1000)
	go func() {
		for e := range w.ResultChan() {
			if s, ok := e.Object.(*v1alpha1.ConfigMapSync); ok {
				seen <- s.Status
			}
		}
		close(seen)
	}()

	targets := map[int64]int{sync.Generation: 2}
	for i := range 30 {
		namespaces := []string{b}
		if i%2 == 0 {
			namespaces = []string{b, c}
		}
		update(t, sync, func(s *v1alpha1.ConfigMapSync) { s.Spec.DestinationNamespaces = namespaces })
		targets[sync.Generation] = 1 + len(namespaces)
		time.Sleep(time.Duration(i%4) * 15 * time.Millisecond)
	}
	last := waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, fmt.Sprintf("%d/%d", targets[sync.Generation], targets[sync.Generation]))
	time.Sleep(time.Second) // the last status events arrive
	cancel()

	statuses := 0
	for s := range seen {
		ready := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
		if ready == nil || s.Synced == "" {
			continue
		}
		statuses++
		want, known := targets[s.ObservedGeneration]
		if !known {
			t.Errorf("status for generation %d, which this test never wrote: %+v", s.ObservedGeneration, s)
			continue
		}
		if int(s.TargetNamespaces) != want || !strings.HasSuffix(s.Synced, fmt.Sprintf("/%d", want)) || ready.ObservedGeneration != s.ObservedGeneration {
			t.Errorf("status of generation %d (Ready of generation %d) counts %s and %d targets; that generation has %d",
				s.ObservedGeneration, ready.ObservedGeneration, s.Synced, s.TargetNamespaces, want)
		}
	}
	if statuses == 0 {
		t.Fatalf("no status seen through the watch (last: %+v)", last.Status)
	}
	t.Logf("%d statuses checked over %d generations", statuses, len(targets))
}

// The source's cmsync.io/strip-metadata is its owner's say over what of their metadata
// leaves the namespace, whichever form copies it: a ConfigMapSync's replicas leave the
// stripped keys out too, and a malformed one makes the ConfigMapSync Invalid, naming
// the source. (target-name and keys shape the replicas per form: a ConfigMapSync's are
// its spec's.)
func TestConfigMapSyncHonoursTheSourcesStripMetadata(t *testing.T) {
	startController(t)
	srcNS, dst := newNamespace(t, "src", nil), newNamespace(t, "dst", nil)
	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "app", Labels: map[string]string{"internal.example.com/owner": "x", "keep": "1"},
			Annotations: map[string]string{v1alpha1.StripMetadataAnnotation: "internal.example.com/*", v1alpha1.TargetNameAnnotation: "ignored-here"}},
		Data: map[string]string{"k": "v"},
	}
	must(t, k8s.Create(context.Background(), src))
	sync := newSync(t, v1alpha1.ConfigMapSyncSpec{SourceNamespace: srcNS, ConfigMapName: "app", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}})
	waitForSyncReplicasIn(t, sync, dst)
	replica, err := getConfigMap(dst, "app")
	must(t, err)
	if _, ok := replica.Labels["internal.example.com/owner"]; ok || replica.Labels["keep"] != "1" {
		t.Errorf("replica labels %v: the source's strip-metadata not honoured", replica.Labels)
	}

	update(t, src, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.StripMetadataAnnotation] = "internal.[x" })
	got := waitForReady(t, sync, metav1.ConditionFalse, v1alpha1.ReasonInvalid)
	if msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "source ConfigMap "+srcNS+"/app") ||
		!strings.Contains(msg, "strip-metadata") {
		t.Errorf("message %q", msg)
	}
}
