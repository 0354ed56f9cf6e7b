package v1alpha1

// MaxListEntries is the most entries cmsync accepts in one list a user writes: the
// annotation form's cmsync.io/target-namespaces, cmsync.io/keys and
// cmsync.io/strip-metadata (desired refuses a longer one as Invalid), and the explicit
// form's destinationNamespaces and keys, whose CRD markers
// (+kubebuilder:validation:MaxItems=256 in configmapsync_types.go and
// objectsync_types.go) carry the same number: a marker cannot name a constant, so
// TestListLimitIsTheCRDs checks the generated CRDs against it.
//
// Every pass matches each entry against every item it filters (each namespace, data
// key, label and annotation key), so an unbounded list would let one source cost
// entries × items glob matches per pass; 256 names far more than a list written by
// hand needs, and a glob or a target-selector covers any number of names.
const MaxListEntries = 256
