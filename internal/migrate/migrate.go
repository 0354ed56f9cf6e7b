// Package migrate decides how the sources and copies of another replicator
// (mittwald's kubernetes-replicator, emberstack's reflector, AppsCode's config-syncer,
// HNC's propagation, Kyverno's generate-clone rules) become cmsync's: for each source,
// the cmsync annotations (or the ConfigMapSync, SecretSync or ObjectSync) that say the
// same, the peer features left behind, and which of the peer's copies cmsync takes
// over in place. Like
// desired, whose decisions it uses for targets and shapes, it is pure:
// kubectl cmsync migrate reads the cluster, asks Plan, and writes what it answers.
package migrate

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// Object is an object's metadata: all migrate reads of the cluster but HNC's and
// Kyverno's configuration. APIVersion is "" for a ConfigMap or Secret, the kind's
// group/version for a kind an ObjectSync copies.
type Object struct {
	Kind       string
	APIVersion string
	*metav1.PartialObjectMetadata
}

// kindKey names the object's kind among all others: "ConfigMap",
// "networking.k8s.io/v1/NetworkPolicy".
func (o Object) kindKey() string { return kindKeyOf(o.APIVersion, o.Kind) }

func kindKeyOf(apiVersion, kind string) string {
	if apiVersion == "" {
		return kind
	}
	return apiVersion + "/" + kind
}

// Move is what migrating one source of a peer does.
type Move struct {
	Peer string `json:"peer"`
	Kind string `json:"kind"`
	// APIVersion is the group/version of a kind an ObjectSync copies; "" for a
	// ConfigMap or Secret.
	APIVersion string               `json:"apiVersion,omitempty"`
	Source     types.NamespacedName `json:"source"`
	// Annotations are the cmsync annotations set on the source, beside the
	// cmsync.io/replicate=true label (the annotation form); nil with Explicit.
	Annotations map[string]string `json:"annotations,omitempty"`
	// ConfigMapSync or SecretSync is created where the peer's form has no annotation
	// equivalent (its pull form); see Explicit.
	ConfigMapSync *v1alpha1.ConfigMapSync `json:"configMapSync,omitempty"`
	SecretSync    *v1alpha1.SecretSync    `json:"secretSync,omitempty"`
	// ObjectSync is created for a source of any other kind (HNC, Kyverno).
	ObjectSync *v1alpha1.ObjectSync `json:"objectSync,omitempty"`
	// Dropped names the source's peer features cmsync has no equivalent of.
	Dropped []string `json:"dropped,omitempty"`
	// Refused says why the source cannot be translated exactly: nothing is applied.
	Refused string `json:"refused,omitempty"`
	// TakeOver are the peer's copies, tied to this source by the peer's own markers,
	// that cmsync takes over in place: they become its replicas without being deleted
	// or created anew.
	TakeOver []Copy `json:"takeOver,omitempty"`
	// Left are copies left alone, with why.
	Left []Copy `json:"left,omitempty"`
	// New are the namespaces where cmsync creates a replica the peer had not made.
	New []string `json:"new,omitempty"`
	// owner is whose replicas the taken-over copies become.
	owner desired.Owner
	// sourceVersion is the resourceVersion of the source as planned (annotation form):
	// its annotations are written only onto that version (SourceVersion).
	sourceVersion string
}

// Copy is one of a peer's copies.
type Copy struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	Why       string    `json:"why,omitempty"`
}

// SourceVersion is the resourceVersion of the source the annotation form was planned
// from; "" for the explicit form, which does not change the source.
func (m Move) SourceVersion() string { return m.sourceVersion }

// Markers are the labels, annotation and owner reference that taking over a copy
// writes onto it (desired.ReplicaMarkers).
func (m Move) Markers() (labels, annotations map[string]string, ref *metav1.OwnerReference) {
	return desired.ReplicaMarkers(m.owner)
}

// Controller is what Plan knows of the controller that keeps the copies once they are
// taken over: its policy, and which kinds and explicit forms it runs at all. A copy is
// taken over only where this controller would keep it as its replica.
type Controller struct {
	Policy desired.Policy
	// Secrets: it replicates Secrets; ConfigMapSyncs, SecretSyncs: it runs the
	// explicit form's controller.
	Secrets, ConfigMapSyncs, SecretSyncs bool
	// ObjectKinds are the kinds an ObjectSync may name (--object-kinds), with what the
	// API server serves of them.
	ObjectKinds desired.ObjectKinds
}

// refusal says why the controller would keep no replica of a source of kind in the
// explicit form (nil: the annotation form), or "".
func (c Controller) refusal(kind string, explicit v1alpha1.Sync) string {
	switch {
	case kind == (desired.SecretKind{}).Name() && !c.Secrets:
		return "cmsync runs with --secrets=disabled: it keeps no Secret as a replica, and a copy taken over would be one that no " +
			"controller keeps and the admission policy lets no one change; enable Secrets (chart value secrets.enabled=true) first"
	case explicit == nil:
		return ""
	case explicit.SyncSpec().Kind == v1alpha1.ObjectSyncKind:
		return c.objectKindRefusal(explicit.SyncSpec())
	case explicit.SyncSpec().Kind == v1alpha1.ConfigMapSyncKind && !c.ConfigMapSyncs:
		return "cmsync runs with --configmapsync=disabled: no controller would keep the copies as replicas of a ConfigMapSync; " +
			"enable it (chart value controller.configMapSync) first"
	case explicit.SyncSpec().Kind == v1alpha1.SecretSyncKind && !c.SecretSyncs:
		return "cmsync runs with --secretsync=disabled: no controller would keep the copies as replicas of a SecretSync; " +
			"enable it (chart value controller.secretSync) first"
	}
	return ""
}

// objectKindRefusal says why the controller would keep no replica of an ObjectSync of
// spec, or "": its kind is not enabled (--object-kinds), not served, or cluster-scoped.
func (c Controller) objectKindRefusal(spec v1alpha1.SyncSpec) string {
	err := c.ObjectKinds.CheckObjectKind(spec.SourceAPIVersion, spec.SourceKind)
	if err == nil {
		return ""
	}
	gv, _ := schema.ParseGroupVersion(spec.SourceAPIVersion)
	if _, enabled := c.ObjectKinds[gv.WithKind(spec.SourceKind)]; !enabled {
		return fmt.Sprintf("cmsync does not copy this kind: %s is not in the controller's --object-kinds; enable it with objectSync.kinds "+
			"(a copy taken over now would be a replica that no controller keeps)", kindKeyOf(spec.SourceAPIVersion, spec.SourceKind))
	}
	// Not served, or cluster-scoped: the controller's own message says what to do.
	return "no controller would keep the copies as replicas of an ObjectSync: " + err.Error()
}

// Plan decides a Move for every source of a peer among objects, with the namespaces
// and the controller's policy, as the controller would then act. Every copy it takes
// over is one the controller keeps as a replica: tied to the source by the peer's own
// markers, of the replica's name, in one of the targets desired.Resolve gives the
// source under the controller's policy, of a kind and form the controller runs.
func Plan(objects []Object, namespaces []desired.Namespace, controller Controller) []Move {
	copies := indexCopies(objects)
	var moves []Move
	for _, obj := range objects {
		if desired.IsReplica(obj) {
			continue
		}
		moves = append(moves, pushMoves(obj, copies, namespaces, controller)...)
	}
	moves = append(moves, pullMoves(objects, namespaces, controller)...)
	sortMoves(moves)
	return moves
}

func sortMoves(moves []Move) {
	slices.SortFunc(moves, func(a, b Move) int {
		return strings.Compare(kindKeyOf(a.APIVersion, a.Kind)+"/"+a.Source.String()+"/"+a.Peer,
			kindKeyOf(b.APIVersion, b.Kind)+"/"+b.Source.String()+"/"+b.Peer)
	})
}

// New marks the targets of the move that no copy serves (taken over, or in the way).
func (m *Move) markNew(targets []string, name string, copies []Object) {
	served := sets.New[string]()
	for _, c := range slices.Concat(m.TakeOver, m.Left) {
		served.Insert(c.Namespace)
	}
	for _, c := range copies {
		if c.GetName() == name {
			served.Insert(c.GetNamespace())
		}
	}
	for _, ns := range targets {
		if !served.Has(ns) {
			m.New = append(m.New, ns)
		}
	}
}

func copyOf(obj Object, why string) Copy {
	return Copy{Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(), Why: why}
}

// Created is the move once its ConfigMapSync or SecretSync exists: its copies become
// replicas of that very object (its UID in their owner reference).
func (m Move) Created(sync v1alpha1.Sync) Move {
	m.setExplicit(sync)
	m.owner = desired.SyncOwner(sync)
	return m
}

// Explicit is the ConfigMapSync, SecretSync or ObjectSync the move creates, or nil.
func (m Move) Explicit() v1alpha1.Sync {
	switch {
	case m.ConfigMapSync != nil:
		return m.ConfigMapSync
	case m.SecretSync != nil:
		return m.SecretSync
	case m.ObjectSync != nil:
		return m.ObjectSync
	}
	return nil
}

func (m *Move) setExplicit(sync v1alpha1.Sync) {
	m.ConfigMapSync, m.SecretSync, m.ObjectSync = nil, nil, nil
	switch s := sync.(type) {
	case *v1alpha1.ConfigMapSync:
		m.ConfigMapSync = s
	case *v1alpha1.SecretSync:
		m.SecretSync = s
	case *v1alpha1.ObjectSync:
		m.ObjectSync = s
	}
}
