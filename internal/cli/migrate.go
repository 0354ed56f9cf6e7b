package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/internal/migrate"
)

// Migration is `kubectl cmsync migrate`'s answer: what moving each peer source onto
// cmsync does, and, with --apply, what was written.
type Migration struct {
	Policy string         `json:"policy"`
	Moves  []migrate.Move `json:"moves"`
	// NotChecked names what the user's rights did not let the plugin read (Secrets, or
	// the namespaces beyond their own): --apply refuses a plan with any.
	NotChecked []NotChecked `json:"notChecked,omitempty"`
	// Applied are the writes --apply made, and the ones that failed.
	Applied []string `json:"applied,omitempty"`
	Failed  []string `json:"failed,omitempty"`
}

func (o *options) migrateCommand(out io.Writer) *cobra.Command {
	var apply bool
	cmd := &cobra.Command{
		Use: "migrate [--apply]",
		Short: "Move from kubernetes-replicator, reflector, config-syncer, HNC or Kyverno generate-clone: each source's cmsync equivalent, " +
			"the copies cmsync takes over in place, what is left behind; --apply writes it with your rights",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u := decides
			if apply {
				u = applies
			}
			s, err := o.open(cmd, u)
			if err != nil {
				return err
			}
			m, err := planMigration(cmd.Context(), s)
			if err != nil {
				return err
			}
			if apply {
				if err := refusePartial(m); err != nil {
					return err
				}
				applyMigration(cmd.Context(), s.cluster, &m)
			}
			if err := o.print(out, m, func(w io.Writer) { printMigration(w, m, apply) }); err != nil {
				return err
			}
			if len(m.Failed) > 0 {
				return fmt.Errorf("%d writes failed", len(m.Failed))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&apply, "apply", false,
		"Write the migration (default: show it and write nothing); only under the controller's policy read from its release (--controller-namespace).")
	return cmd
}

// planMigration reads the metadata of every ConfigMap and Secret (never a value) and
// every namespace, HNC's configuration and tree and Kyverno's ClusterPolicies where
// they are installed, with the metadata of the kinds they copy, and plans the moves
// for the controller as read. Without the rights
// to list them cluster-wide, it plans with what the context's namespace shows.
func planMigration(ctx context.Context, s session) (Migration, error) {
	m := Migration{Policy: s.controller.where}
	near := nearby(s.namespace)
	namespaces, _, err := s.namespaces(ctx, near...)
	if err != nil {
		return m, err
	}
	var objects []migrate.Object
	for _, kind := range []string{configMapKind, secretKind} {
		items, _, err := s.listEverywhere(ctx, kind, near, kind+"s of other replicators, and their copies")
		if err != nil {
			return m, err
		}
		for i := range items {
			objects = append(objects, migrate.Object{Kind: kind, PartialObjectMetadata: &items[i]})
		}
	}
	m.Moves = migrate.Plan(objects, namespaces, s.controller.migrateController())
	hnc, err := planHNC(ctx, s, namespaces, near)
	if err != nil {
		return m, err
	}
	kyverno, err := planKyverno(ctx, s, namespaces, near)
	if err != nil {
		return m, err
	}
	m.Moves = slices.Concat(m.Moves, hnc, kyverno)
	if err := leaveCopiesThatDiffer(ctx, s.cluster, m.Moves); err != nil {
		return m, err
	}
	m.NotChecked = s.missed.list()
	return m, nil
}

// leaveCopiesThatDiffer moves the copies of an ObjectSync kind whose content is not
// their source's from those taken over to those left (sameContent says why), so that
// the plan shows what --apply, which checks again, would refuse. A copy left so is a
// conflict the ObjectSync reports until someone makes it equal to its source or
// deletes it. What the user may not read is named, and --apply then refuses the plan.
func leaveCopiesThatDiffer(ctx context.Context, c cluster, moves []migrate.Move) error {
	for i := range moves {
		move := &moves[i]
		kind := moveKind(*move)
		if move.Refused != "" || !isObjectKind(kind) || len(move.TakeOver) == 0 {
			continue
		}
		source, err := sourceContent(ctx, c, kind, move.Source)
		if apierrors.IsForbidden(err) {
			c.missed.add(mayGet(kind, move.Source.Namespace), "the source "+move.Source.String()+": its copies' content not compared with it")
			continue
		}
		if err != nil {
			return err
		}
		var kept []migrate.Copy
		for _, copy := range move.TakeOver {
			_, content, err := readCopy(ctx, c, kind, types.NamespacedName{Namespace: copy.Namespace, Name: copy.Name})
			switch {
			case apierrors.IsForbidden(err):
				c.missed.add(mayGet(kind, copy.Namespace), "the copy "+copy.Namespace+"/"+copy.Name+": its content not compared with its source")
			case err != nil && !apierrors.IsNotFound(err): // a copy gone since is --apply's to find
				return fmt.Errorf("reading the copy %s/%s of %s: %w", copy.Namespace, copy.Name, move.Source, err)
			case err == nil:
				if differs := sameContent(move.Source, source, content); differs != nil {
					copy.Why = differs.Error()
					move.Left = append(move.Left, copy)
					continue
				}
			}
			kept = append(kept, copy)
		}
		move.TakeOver = kept
	}
	return nil
}

// refusePartial refuses to apply a plan made without seeing everything: a copy not
// seen is neither taken over nor known to be in the way.
func refusePartial(m Migration) error {
	if len(m.NotChecked) == 0 {
		return nil
	}
	gaps := make([]string, 0, len(m.NotChecked))
	for _, n := range m.NotChecked {
		gaps = append(gaps, n.Unchecked+" (missing: "+n.Missing+")")
	}
	return fmt.Errorf("migrate --apply refused: the plan was made without reading %s; nothing written. "+
		"Run it as a user who may read them, or migrate without --apply to see the plan", strings.Join(gaps, "; "))
}

// applyMigration writes each move that is not refused: first the source's form (its
// annotations and label, or the ConfigMapSync or SecretSync), so that cmsync knows the
// source before it sees its replicas; then the take-over of each copy, which makes it
// a replica without deleting or recreating it. cmsync itself never writes an object
// it did not create: the take-over is this user's write, with this user's rights.
func applyMigration(ctx context.Context, c cluster, m *Migration) {
	for i, move := range m.Moves {
		if move.Refused != "" {
			continue
		}
		done, err := applyForm(ctx, c, move)
		if err != nil {
			m.Failed = append(m.Failed, err.Error())
			continue
		}
		m.Moves[i] = done
		m.Applied = append(m.Applied, describeForm(done))
		for _, copy := range done.TakeOver {
			if err := takeOver(ctx, c, done, copy); err != nil {
				m.Failed = append(m.Failed, fmt.Sprintf("taking over %s %s/%s: %v", done.Kind, copy.Namespace, copy.Name, err))
				continue
			}
			m.Applied = append(
				m.Applied,
				fmt.Sprintf("took over %s %s/%s (uid %s) as a replica of %s", done.Kind, copy.Namespace, copy.Name, copy.UID, done.Source),
			)
		}
	}
}

// applyForm writes the move's cmsync form and returns the move as written.
func applyForm(ctx context.Context, c cluster, move migrate.Move) (migrate.Move, error) {
	explicit := move.Explicit()
	if explicit == nil {
		// Written onto the version planned from, or not at all: the copies taken over
		// next are those of the form as planned.
		metadata := map[string]any{
			"labels":      map[string]string{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue},
			"annotations": move.Annotations,
		}
		if version := move.SourceVersion(); version != "" {
			metadata["resourceVersion"] = version
		}
		patch := map[string]any{"metadata": metadata}
		err := mergePatch(ctx, c, move.Kind, move.Source, patch)
		if apierrors.IsConflict(err) {
			return move, fmt.Errorf("annotating %s %s: it changed since it was read: run migrate again", move.Kind, move.Source)
		}
		if err != nil {
			return move, fmt.Errorf("annotating %s %s: %w", move.Kind, move.Source, err)
		}
		return move, nil
	}
	kind := explicit.SyncSpec().Kind
	err := c.client.Create(ctx, explicit)
	if apierrors.IsAlreadyExists(err) {
		existing := newSync(kind)
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(explicit), existing); err != nil {
			return move, err
		}
		// Its copies are taken over as replicas of the existing object: only where its
		// spec is the one planned are they among its targets.
		if !equality.Semantic.DeepEqual(existing.SyncSpec(), explicit.SyncSpec()) {
			return move, fmt.Errorf("%s %s exists with another spec than the migration's; nothing of %s %s taken over: compare them, "+
				"delete or fix it, and run migrate again", kind, existing.GetName(), move.Kind, move.Source)
		}
		return move.Created(existing), nil
	}
	if err != nil {
		return move, fmt.Errorf("creating %s %s: %w", kind, explicit.GetName(), err)
	}
	return move.Created(explicit), nil
}

// takeOver writes the replica markers onto a copy, and makes cmsync the manager of its
// content: one server-side apply under cmsync's field manager, forced, of the markers
// and the copy's own content as it is, conditional on the version read. Nothing of the
// copy changes but its markers; its content's managedFields now name cmsync, as on a
// replica cmsync wrote, so that cmsync sees from a replica's metadata alone when
// someone edits it (another manager then owns a content field), and repairs it.
func takeOver(ctx context.Context, c cluster, move migrate.Move, copy migrate.Copy) error {
	key := types.NamespacedName{Namespace: copy.Namespace, Name: copy.Name}
	kind := moveKind(move)
	current, content, err := readCopy(ctx, c, kind, key)
	if err != nil {
		return err
	}
	if current.GetUID() != copy.UID {
		return fmt.Errorf("replaced since it was read (uid %s, now %s): run migrate again", copy.UID, current.GetUID())
	}
	// The plan left out copies with finalizers or owner references; one that gained
	// them since would carry them into cmsync's replica.
	if len(current.GetFinalizers()) > 0 || len(current.GetOwnerReferences()) > 0 {
		return fmt.Errorf("it has finalizers or owner references now (%v, %d), which a replica of cmsync's must not: run migrate again",
			current.GetFinalizers(), len(current.GetOwnerReferences()))
	}
	if isObjectKind(kind) {
		source, err := sourceContent(ctx, c, kind, move.Source)
		if err != nil {
			return err
		}
		if err := sameContent(move.Source, source, content); err != nil {
			return err
		}
	}
	labels, annotations, ref := move.Markers()
	metadata := map[string]any{
		"name": copy.Name, "namespace": copy.Namespace, "uid": current.GetUID(), "resourceVersion": current.GetResourceVersion(),
		"labels": labels, "annotations": annotations,
	}
	if ref != nil {
		metadata["ownerReferences"] = []metav1.OwnerReference{*ref}
	}
	applied := map[string]any{"apiVersion": gvkOf(kind).GroupVersion().String(), "kind": move.Kind, "metadata": metadata}
	maps.Copy(applied, content)
	raw, err := json.Marshal(applied)
	if err != nil {
		return err
	}
	obj := metadataOf(kind)
	obj.Namespace, obj.Name = key.Namespace, key.Name
	return c.client.Patch(ctx, obj, client.RawPatch(types.ApplyPatchType, raw), client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership)
}

// sourceContent reads the content of the source of a move of an ObjectSync kind.
func sourceContent(ctx context.Context, c cluster, kind string, source types.NamespacedName) (desired.Content, error) {
	objectKind := desired.NewObjectKind(gvkOf(kind))
	obj := objectKind.New()
	if err := c.client.Get(ctx, source, obj); err != nil {
		return desired.Content{}, fmt.Errorf("reading the source %s: %w", source, err)
	}
	return objectKind.Content(obj), nil
}

// sameContent refuses a copy of an ObjectSync kind whose content is not its source's:
// cmsync keeps the fields of a replica that its source does not set (they may be the
// API server's defaults or another writer's), so a copy taken over with fields of its
// own, such as an ingress rule that opens a default-deny NetworkPolicy, would keep
// them. A ConfigMap's or Secret's replica gets its source's keys whole at the next pass.
func sameContent(source types.NamespacedName, want desired.Content, content map[string]any) error {
	if !desired.SameContent(desired.Content{Fields: content}, want) {
		return fmt.Errorf("%w %s's, and cmsync would keep what the copy sets beyond the source: "+
			"make the copy equal to its source (or delete it: cmsync then creates the replica), and run migrate again", errDiffersFromSource, source)
	}
	return nil
}

// errDiffersFromSource is sameContent's refusal.
var errDiffersFromSource = errors.New("its content differs from its source")

// readCopy reads a copy whole, and returns its content fields as they are. A Secret's
// values go from this read into the apply that writes them back unchanged, and nowhere
// else.
func readCopy(ctx context.Context, c cluster, kind string, key types.NamespacedName) (metav1.Object, map[string]any, error) {
	content := map[string]any{}
	if isObjectKind(kind) {
		objectKind := desired.NewObjectKind(gvkOf(kind))
		obj := objectKind.New()
		if err := c.client.Get(ctx, key, obj); err != nil {
			return nil, nil, err
		}
		return obj, objectKind.Content(obj).Fields, nil
	}
	if kind == secretKind {
		s := &corev1.Secret{}
		if err := c.client.Get(ctx, key, s); err != nil {
			return nil, nil, err
		}
		content["type"] = s.Type
		setIf(content, "data", s.Data, len(s.Data) > 0)
		setIf(content, "immutable", s.Immutable, s.Immutable != nil)
		return s, content, nil
	}
	cm := &corev1.ConfigMap{}
	if err := c.client.Get(ctx, key, cm); err != nil {
		return nil, nil, err
	}
	setIf(content, "data", cm.Data, len(cm.Data) > 0)
	setIf(content, "binaryData", cm.BinaryData, len(cm.BinaryData) > 0)
	setIf(content, "immutable", cm.Immutable, cm.Immutable != nil)
	return cm, content, nil
}

// moveKind is the plugin's name of the kind of a move's source and copies.
func moveKind(move migrate.Move) string {
	if move.APIVersion == "" {
		return move.Kind
	}
	return desired.ObjectKindEntry(schema.FromAPIVersionAndKind(move.APIVersion, move.Kind))
}

func setIf(m map[string]any, key string, value any, set bool) {
	if set {
		m[key] = value
	}
}

func mergePatch(ctx context.Context, c cluster, kind string, key types.NamespacedName, patch map[string]any) error {
	raw, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	obj := metadataOf(kind)
	obj.Namespace, obj.Name = key.Namespace, key.Name
	return c.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, raw))
}

func describeForm(move migrate.Move) string {
	if explicit := move.Explicit(); explicit != nil {
		return fmt.Sprintf("created %s %s for %s %s", explicit.SyncSpec().Kind, explicit.GetName(), move.Kind, move.Source)
	}
	return fmt.Sprintf(
		"labelled %s %s %s=%s and annotated it %s",
		move.Kind,
		move.Source,
		v1alpha1.ReplicateLabel,
		v1alpha1.ReplicateLabelValue,
		annotationList(move.Annotations),
	)
}

func annotationList(a map[string]string) string {
	parts := make([]string, 0, len(a))
	for _, k := range slices.Sorted(maps.Keys(a)) {
		parts = append(parts, k+"="+a[k])
	}
	return strings.Join(parts, " ")
}

func printMigration(w io.Writer, m Migration, applied bool) {
	printf(w, "%d sources of other replicators (controller policy from %s)\n", len(m.Moves), m.Policy)
	printNotChecked(w, m.NotChecked)
	for _, move := range m.Moves {
		printf(w, "\n%s %s (%s)\n", move.Kind, move.Source, move.Peer)
		switch {
		case move.Refused != "":
			printf(w, "  refused, nothing applied: %s\n", move.Refused)
		case move.Explicit() != nil:
			explicit := move.Explicit()
			raw, _ := json.Marshal(explicit.SyncSpec().ReplicaSpec)
			printf(w, "  cmsync: %s %s %s\n", explicit.SyncSpec().Kind, explicit.GetName(), raw)
		default:
			printf(w, "  cmsync: label %s=%s, %s\n", v1alpha1.ReplicateLabel, v1alpha1.ReplicateLabelValue, annotationList(move.Annotations))
		}
		for _, d := range move.Dropped {
			printf(w, "  dropped: %s\n", d)
		}
		for _, c := range move.TakeOver {
			printf(w, "  take over\t%s/%s\n", c.Namespace, c.Name)
		}
		for _, ns := range move.New {
			printf(w, "  new replica\t%s\n", ns)
		}
		for _, c := range move.Left {
			printf(w, "  left alone\t%s/%s\t%s\n", c.Namespace, c.Name, c.Why)
		}
	}
	if applied {
		printf(w, "\n%d writes, %d failed\n", len(m.Applied), len(m.Failed))
		for _, f := range m.Failed {
			printf(w, "  failed: %s\n", f)
		}
	} else {
		printf(w, "\nNothing written: run again with --apply, after stopping the other replicator.\n")
	}
}
