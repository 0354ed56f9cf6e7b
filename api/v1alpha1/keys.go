package v1alpha1

import "slices"

// Every label, annotation and name cmsync reads or writes, built from one prefix.
// docs/reference.md is the public contract for these values; they never change at run time.
const (
	// Prefix is the API group and the prefix of every cmsync key.
	Prefix = "cmsync.io/"

	// FieldManager names cmsync in managedFields and server-side apply requests.
	FieldManager = "cmsync"
)

// Keys users write on a source (a ConfigMap, or a Secret when Secrets are enabled).
const (
	// ReplicateLabel opts a ConfigMap in when set to ReplicateLabelValue. Only ConfigMaps
	// carrying it are sources; the controller's source cache is filtered on it.
	ReplicateLabel      = Prefix + "replicate"
	ReplicateLabelValue = "true"

	// TargetNamespacesAnnotation is a comma list of namespace names and globs; an entry
	// starting with "!" excludes.
	TargetNamespacesAnnotation = Prefix + "target-namespaces"

	// TargetSelectorAnnotation is a namespace label selector in kubectl -l syntax.
	TargetSelectorAnnotation = Prefix + "target-selector"

	// StripMetadataAnnotation is a comma list of label/annotation key globs not to copy.
	StripMetadataAnnotation = Prefix + "strip-metadata"

	// TargetNameAnnotation is the name of the replicas; absent, the source's name.
	TargetNameAnnotation = Prefix + "target-name"

	// KeysAnnotation is a comma list of key globs over data and binaryData: only the
	// matching keys are copied; an entry starting with "!" excludes.
	KeysAnnotation = Prefix + "keys"

	// IgnoreNamespaceLabel set to "true" on a namespace keeps every replica out of it.
	IgnoreNamespaceLabel      = Prefix + "ignore"
	IgnoreNamespaceLabelValue = "true"

	// AcceptFromAnnotation on a Namespace is a comma list of namespace names and globs
	// ("!" excludes) whose sources may replicate into it across the tenant boundary
	// (--tenant-label). Whoever may annotate the namespace sets it.
	AcceptFromAnnotation = Prefix + "accept-from"
)

// RootCAConfigMapName is the ConfigMap Kubernetes publishes into every namespace with
// the API server's CA, which every Pod's service-account volume trusts. cmsync never
// creates, changes or deletes an object of that name, whatever its flags say.
const RootCAConfigMapName = "kube-root-ca.crt"

// Status annotations the controller writes on a source; users never write them.
const (
	StatusAnnotation       = Prefix + "status"
	SyncedAnnotation       = Prefix + "synced"
	MessageAnnotation      = Prefix + "message"
	LastSyncTimeAnnotation = Prefix + "last-sync-time"
)

// Values of StatusAnnotation.
const (
	StatusSynced   = "Synced"
	StatusDegraded = "Degraded"
	StatusInvalid  = "Invalid"
)

// Markers every replica carries.
const (
	// ManagedByLabel with ManagedByValue marks a ConfigMap as written by cmsync.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "cmsync"

	// SourceAnnotation names the source of a replica as "<namespace>/<name>". It is the
	// authority on ownership: a replica belongs to the source it names, and to no other.
	SourceAnnotation = Prefix + "source"

	// SourceIDLabel holds a fixed-length hash of "<namespace>/<name>" of the source, so
	// all replicas of one source can be listed with one label selector even when the
	// source's name is longer than a label value may be (63 characters).
	SourceIDLabel = Prefix + "source-id"

	// ContentHashLabel holds a fixed-length hash of the content cmsync wrote into a
	// replica (its data, binaryData, type and immutable flag). With the ownership that
	// managedFields record, it tells whether a replica is in sync from its metadata
	// alone, so cmsync watches replicas' metadata, not their content. A label, not an
	// annotation: replicas carry cmsync's annotation keys only as docs/reference.md lists them.
	ContentHashLabel = Prefix + "content-hash"

	// LastAppliedAnnotation is kubectl's client-side apply record; it describes the
	// source, not the replica, so it is never copied.
	LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
)

// Reasons of the Events recorded on a source, and on a ConfigMapSync or SecretSync.
// docs/reference.md#reasons says where cmsync gives each reason (a test reads it from
// the code).
const (
	ReasonSynced   = "Synced"
	ReasonConflict = "Conflict"
	ReasonInvalid  = "Invalid"
	ReasonFailed   = "Failed"
)

// statusAnnotations are the status annotations cmsync writes on a source: an array, so
// that no caller can change them.
var statusAnnotations = [...]string{StatusAnnotation, SyncedAnnotation, MessageAnnotation, LastSyncTimeAnnotation}

// StatusAnnotations are the status annotations cmsync writes on a source.
func StatusAnnotations() []string { return slices.Clone(statusAnnotations[:]) }

// IsStatusAnnotation reports whether key is one of the status annotations cmsync writes
// on a source (it allocates nothing: diffs call it for every stale annotation).
func IsStatusAnnotation(key string) bool { return slices.Contains(statusAnnotations[:], key) }

// Names and condition vocabulary of the explicit kinds, ConfigMapSync and SecretSync.
const (
	// ConfigMapSyncKind, SecretSyncKind and ObjectSyncKind are the kinds of the
	// explicit front door.
	ConfigMapSyncKind = "ConfigMapSync"
	SecretSyncKind    = "SecretSync"
	ObjectSyncKind    = "ObjectSync"

	// CleanupFinalizer keeps a ConfigMapSync or SecretSync until its replicas are
	// deleted, so deletion works also where no garbage collector honours owner
	// references.
	CleanupFinalizer = Prefix + "cleanup"

	// ConditionReady is the one condition of a ConfigMapSync or SecretSync.
	ConditionReady = "Ready"

	// Reasons of the Ready condition, besides ReasonSynced, ReasonInvalid and
	// ReasonFailed (the source could not be read). A Degraded pass's Event says
	// ReasonConflict or ReasonFailed instead; ReasonSourceNotFound is also its Event's.
	ReasonDegraded       = "Degraded"
	ReasonSourceNotFound = "SourceNotFound"
)
