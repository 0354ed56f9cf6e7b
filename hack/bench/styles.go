package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/hack/bench/measure"
	"github.com/cmsync/cmsync/hack/bench/report"
	"github.com/cmsync/cmsync/hack/bench/workload"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
	"github.com/cmsync/cmsync/replicator/replicastore/metawrite"
)

// writeStyle creates or updates one object as a client would, and deletes it as that
// client would.
type writeStyle struct {
	name   string
	write  func(ctx context.Context, cm *corev1.ConfigMap) (written, error)
	delete func(ctx context.Context, cm *corev1.ConfigMap, uid types.UID) error
}

// written is what a style's write answered: the object's new resourceVersion, and its
// UID for the style's delete precondition.
type written struct {
	version string
	uid     types.UID
}

// writeStyles times the same updates of one replica-shaped ConfigMap per namespace
// (its payload -styles-size) written four ways — client-go's default JSON without a
// precondition (LIMIT's way), protobuf without a precondition, controller-runtime's
// client (protobuf, conditional on the resourceVersion, field manager cmsync: cmsync's
// way below replicator's metadataAnswersFrom), and the same asking for the metadata
// alone in the answer (metawrite: cmsync's way from that size up) —
// each with no watcher and with a metadata-only watch of the objects open, as cmsync's
// replica store holds. The styles take turns in every round. With -styles-op delete it
// times deletes instead: in every round each style creates its objects (untimed), then
// deletes them, the first two without a precondition (LIMIT's way), the last two on the
// UID created, as cmsync deletes a replica (here through controller-runtime's client;
// the replica store sends the same delete through metawrite, which reads less of the
// answer).
func writeStyles(c config) error {
	deletes := c.stylesOp == verbDelete
	if !deletes && c.stylesOp != verbUpdate {
		return fmt.Errorf("-styles-op %q: update or delete", c.stylesOp)
	}
	if c.rounds < 2 && !deletes {
		return fmt.Errorf("styles needs -rounds of at least 2 for updates: the first round creates the objects")
	}
	size, err := resource.ParseQuantity(c.stylesSize)
	if err != nil {
		return fmt.Errorf("-styles-size %q: %w", c.stylesSize, err)
	}
	// Old revisions count against etcd's quota until compacted (as in a sweep).
	b, stop, err := startBench(c, controlplane.Options{EtcdQuotaBytes: 16 << 30})
	if err != nil {
		return err
	}
	defer stop()
	b.payload = strings.Repeat("x", int(size.Value()))
	ctx := context.Background()
	step("creating %d namespaces", c.namespaces)
	b.createNamespaces(ctx, c.namespaces)

	styles, err := b.writeStyleList()
	if err != nil {
		return err
	}
	var runs []*styleRun
	for _, watched := range []bool{false, true} {
		for _, s := range styles {
			runs = append(runs, &styleRun{style: s, figure: report.StyleFigure{Name: s.name, Watched: watched},
				key: styleKey(s.name, watched), written: make([]written, len(b.targets))})
		}
	}
	for r := range c.rounds {
		step("round %d of %d: %d %ss in each of %d styles", r+1, c.rounds, len(b.targets), c.stylesOp, len(runs))
		for _, run := range runs {
			if err := b.styleRound(ctx, run, r, deletes); err != nil {
				return err
			}
		}
	}
	return reportStyles(c, int(size.Value()), runs)
}

// styleRun is one style, watched or not, with what its last writes answered.
type styleRun struct {
	style   writeStyle
	figure  report.StyleFigure
	key     string
	written []written
}

// styleRound times round r of one style's writes (or deletes, with the objects created
// untimed first) and adds its CPU to the figure; the first round of updates creates the
// objects and is not counted.
func (b *bench) styleRound(ctx context.Context, run *styleRun, r int, deletes bool) error {
	if deletes {
		if err := workload.Parallel(b.c.workers, len(b.targets), func(n int) error {
			w, err := run.style.write(ctx, b.styleObject(run.key, n, r, ""))
			run.written[n] = w
			return err
		}); err != nil {
			return fmt.Errorf("%s: creating: %w", run.key, err)
		}
	}
	closeWatch := func() {}
	if run.figure.Watched {
		stop, err := b.watchMetadata(ctx, "bench.limit/managed-by="+run.key)
		if err != nil {
			return err
		}
		closeWatch = stop
	}
	time.Sleep(time.Second) // the previous style's writes settle
	before := measure.ProcessCPU()
	err := workload.Parallel(b.c.workers, len(b.targets), func(n int) error {
		if deletes {
			return run.style.delete(ctx, b.styleObject(run.key, n, r, ""), run.written[n].uid)
		}
		w, err := run.style.write(ctx, b.styleObject(run.key, n, r, run.written[n].version))
		run.written[n] = w
		return err
	})
	after := measure.ProcessCPU()
	closeWatch()
	if err != nil {
		return fmt.Errorf("%s: %w", run.key, err)
	}
	if r == 0 && !deletes {
		return nil // the first round creates the objects
	}
	cpu := after["kube-apiserver"] - before["kube-apiserver"] + after["etcd"] - before["etcd"]
	run.figure.RoundsPer1000 = append(run.figure.RoundsPer1000, cpu*1000/float64(len(b.targets)))
	run.figure.RoundsWriterPer1000 = append(run.figure.RoundsWriterPer1000, (after["bench"]-before["bench"])*1000/float64(len(b.targets)))
	return nil
}

// reportStyles prints the styles' medians and saves them.
func reportStyles(c config, sizeBytes int, runs []*styleRun) error {
	fmt.Printf("\nCPU s per 1,000 %ss of a %s replica-shaped ConfigMap, %d namespaces, medians of %d rounds: "+
		"API server + etcd, and the writer\n", c.stylesOp, c.stylesSize, c.namespaces, len(runs[0].figure.RoundsPer1000))
	res := report.StylesResult{Date: time.Now().UTC().Format(time.RFC3339), Machine: report.Machine(), Namespaces: c.namespaces,
		SizeBytes: sizeBytes, Rounds: c.rounds, Operation: c.stylesOp}
	identity := func(v float64) float64 { return v }
	for _, run := range runs {
		run.figure.MedianPer1000 = report.MedianOf(run.figure.RoundsPer1000, identity)
		run.figure.MedianWriterPer1000 = report.MedianOf(run.figure.RoundsWriterPer1000, identity)
		fmt.Printf("  %-32s %.2f  (rounds %s)  writer %.2f  (rounds %s)\n", run.key, run.figure.MedianPer1000,
			report.FloatList(run.figure.RoundsPer1000), run.figure.MedianWriterPer1000, report.FloatList(run.figure.RoundsWriterPer1000))
		res.Styles = append(res.Styles, run.figure)
	}
	return report.Save(c.out, "styles-", res)
}

func styleKey(name string, watched bool) string {
	if watched {
		return name + "-watched"
	}
	return name
}

// styleObject is the object of style key in target namespace n in round r, of a
// replica's shape (replicaShaped, labelled with key for the style's watch): created in
// the first round, updated after, conditional on version where the style sends it.
func (b *bench) styleObject(key string, n, r int, version string) *corev1.ConfigMap {
	o := workload.ReplicaShaped(b.targets[n], "styles-"+key, key, strconv.Itoa(r%10), b.payload)
	o.ResourceVersion = version
	return &corev1.ConfigMap{ObjectMeta: o.ObjectMeta, Data: o.Data}
}

// writeStyleList is the four ways of writing. Each creates an object without a
// resourceVersion; the first two drop it on update, as a plain client that does not
// read before it writes does.
func (b *bench) writeStyleList() ([]writeStyle, error) {
	cfg := rest.CopyConfig(b.env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	protobuf := rest.CopyConfig(cfg)
	protobuf.ContentType = runtime.ContentTypeProtobuf
	protobufClient, err := kubernetes.NewForConfig(protobuf)
	if err != nil {
		return nil, err
	}
	typed, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	metadataAnswers, err := metawrite.New(cfg, httpClient, mapper, 0)
	if err != nil {
		return nil, err
	}
	return []writeStyle{
		unconditionalStyle("json", b.cs),
		unconditionalStyle("protobuf", protobufClient),
		typedStyle(typed),
		metadataStyle(metadataAnswers, typed),
	}, nil
}

// unconditionalStyle writes with client-go's clientset, without a precondition.
func unconditionalStyle(name string, cs *kubernetes.Clientset) writeStyle {
	return writeStyle{
		name: name,
		write: func(ctx context.Context, cm *corev1.ConfigMap) (written, error) {
			configMaps := cs.CoreV1().ConfigMaps(cm.Namespace)
			var out *corev1.ConfigMap
			var err error
			if cm.ResourceVersion == "" {
				out, err = configMaps.Create(ctx, cm, metav1.CreateOptions{})
			} else {
				cm.ResourceVersion = ""
				out, err = configMaps.Update(ctx, cm, metav1.UpdateOptions{})
			}
			if err != nil {
				return written{}, err
			}
			return written{version: out.ResourceVersion, uid: out.UID}, nil
		},
		delete: func(ctx context.Context, cm *corev1.ConfigMap, _ types.UID) error {
			return cs.CoreV1().ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{})
		},
	}
}

// typedStyle writes with controller-runtime's client: protobuf, conditional on the
// resourceVersion and the UID, field manager cmsync.
func typedStyle(typed client.Client) writeStyle {
	return writeStyle{name: "typed", write: func(ctx context.Context, cm *corev1.ConfigMap) (written, error) {
		var err error
		if cm.ResourceVersion == "" {
			err = typed.Create(ctx, cm, client.FieldOwner(v1alpha1.FieldManager))
		} else {
			err = typed.Update(ctx, cm, client.FieldOwner(v1alpha1.FieldManager))
		}
		return written{version: cm.ResourceVersion, uid: cm.UID}, err
	}, delete: func(ctx context.Context, cm *corev1.ConfigMap, uid types.UID) error {
		return typed.Delete(ctx, cm, client.Preconditions{UID: &uid})
	}}
}

// metadataStyle writes as cmsync's replica store does from metadataAnswersFrom up:
// asking for the metadata alone in the answer (metawrite), and deleting by metadata.
func metadataStyle(metadataAnswers *metawrite.Client, typed client.Client) writeStyle {
	return writeStyle{name: "metadata", write: func(ctx context.Context, cm *corev1.ConfigMap) (written, error) {
		var w *metav1.PartialObjectMetadata
		var err error
		if cm.ResourceVersion == "" {
			w, err = metadataAnswers.Create(ctx, cm, client.FieldOwner(v1alpha1.FieldManager))
		} else {
			w, err = metadataAnswers.Update(ctx, cm, client.FieldOwner(v1alpha1.FieldManager))
		}
		if err != nil {
			return written{}, err
		}
		return written{version: w.ResourceVersion, uid: w.UID}, nil
	}, delete: func(ctx context.Context, cm *corev1.ConfigMap, uid types.UID) error {
		// Given metadata, controller-runtime's client deletes through its metadata
		// client: the request the replica store sends (its objectAt).
		at := desired.NewMetadata(desired.ConfigMapKind{})
		at.SetNamespace(cm.Namespace)
		at.SetName(cm.Name)
		return typed.Delete(ctx, at, client.Preconditions{UID: &uid})
	}}
}
