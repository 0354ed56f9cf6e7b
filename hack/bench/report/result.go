package report

// Result is one run's figures; durations in seconds, memory in MiB.
type Result struct {
	Date         string             `json:"date"`
	Machine      string             `json:"machine"`
	Namespaces   int                `json:"namespaces"`
	Unrelated    int                `json:"unrelatedConfigMaps"`
	Sources      int                `json:"scaleSources"`
	Rounds       int                `json:"rounds"`
	Limit        Phases             `json:"limit"`  // medians
	Cmsync       Phases             `json:"cmsync"` // medians
	LimitRounds  []Phases           `json:"limitRounds"`
	CmsyncRounds []Phases           `json:"cmsyncRounds"`
	IdleWrites   int64              `json:"idleWrites"`
	IdleSeconds  float64            `json:"idleSeconds"`
	Restart      Restart            `json:"restart"`
	Memory       map[string]Memory  `json:"memory"`
	Scale        Scale              `json:"scale"`
	Ratios       map[string]float64 `json:"ratios"`
	// Breakdown splits each round's phases by the audit log's timestamps.
	LimitBreakdown  []Breakdown `json:"limitBreakdown"`
	CmsyncBreakdown []Breakdown `json:"cmsyncBreakdown"`
	// Secrets are the same rounds with Secrets, cmsync running with --secrets=enabled.
	Secrets SecretResult `json:"secrets"`
	// ObjectSync is the same rounds with a NetworkPolicy copied by an ObjectSync, cmsync
	// running with --object-kinds naming NetworkPolicy.
	ObjectSync ObjectSyncResult `json:"objectSync"`
}

// ObjectSyncResult is the ObjectSync rounds' figures, like Result's for ConfigMaps:
// LIMIT writes NetworkPolicies of a replica's shape; cmsync's rounds create an
// ObjectSync naming a source NetworkPolicy, change the source and delete the ObjectSync.
type ObjectSyncResult struct {
	Rounds int    `json:"rounds"`
	Limit  Phases `json:"limit"`
	Cmsync Phases `json:"cmsync"`
	RoundFigures
	// LimitWatchedFigures are set with -object-limit-watched.
	LimitWatchedFigures
	IdleWrites int64   `json:"idleWrites"`
	Restart    Restart `json:"restart"`
	// Memory is cmsync's resident size after the idle phase, one policy replicated
	// to every namespace.
	Memory Memory `json:"memory"`
}

// SecretResult is the Secret rounds' figures, like Result's for ConfigMaps.
type SecretResult struct {
	Rounds int    `json:"rounds"`
	Limit  Phases `json:"limit"`
	Cmsync Phases `json:"cmsync"`
	RoundFigures
	IdleWrites int64 `json:"idleWrites"`
}

// LimitWatchedFigures are LIMIT's writes run a second time with a metadata-only watch
// of them open, as cmsync's replica store watches its replicas: medians, each round's
// seconds, and their breakdown.
type LimitWatchedFigures struct {
	LimitWatched          *Phases     `json:"limitWatched,omitempty"`
	LimitWatchedRounds    []Phases    `json:"limitWatchedRounds,omitempty"`
	LimitWatchedBreakdown []Breakdown `json:"limitWatchedBreakdown,omitempty"`
}

// RoundFigures are every round's seconds and breakdowns, LIMIT's and cmsync's.
type RoundFigures struct {
	LimitRounds     []Phases    `json:"limitRounds"`
	CmsyncRounds    []Phases    `json:"cmsyncRounds"`
	LimitBreakdown  []Breakdown `json:"limitBreakdown"`
	CmsyncBreakdown []Breakdown `json:"cmsyncBreakdown"`
}

// Breakdown splits the create, update and delete phases of one round.
type Breakdown struct {
	Create Split `json:"create"`
	Update Split `json:"update"`
	Delete Split `json:"delete"`
}

// Split is where one phase's time went, from the API server's audit log: until the
// first write to a target namespace was received (for cmsync: the source event reaching
// it and its pass starting), from there to the last write's response, and from there
// until the phase's clock stopped (LIMIT's stops when its last response arrives,
// cmsync's at its last write's completion, so this is 0 for it). Writes counts the
// writes to target namespaces in the phase.
type Split struct {
	BeforeFirstWrite float64 `json:"beforeFirstWriteSeconds"`
	Writing          float64 `json:"writingSeconds"`
	AfterLastWrite   float64 `json:"afterLastWriteSeconds"`
	Writes           int     `json:"writes"`
	// In cmsync's rounds, the writes to the owner (the source, or the ObjectSync) place
	// the pass in the phase: SourceWritten is when the user's write that starts the
	// phase completed (so BeforeFirstWrite less SourceWritten is the way from there to
	// cmsync's first replica write: its watch's event, its queue and its pass's reads),
	// OwnerWritesBeforeFirstWrite counts cmsync's writes to the owner before its first
	// replica write (a finalizer, a status), and StatusAfterLastWrite is from the last
	// replica write's completion to that of cmsync's status write after it.
	SourceWritten               float64 `json:"sourceWrittenSeconds,omitempty"`
	OwnerWritesBeforeFirstWrite int     `json:"ownerWritesBeforeFirstWrite,omitempty"`
	StatusAfterLastWrite        float64 `json:"statusAfterLastWriteSeconds,omitempty"`
	// LatencyMillis is the mean time the API server took per write; InFlight is the
	// mean number of writes it had in hand while writing (the sum of the writes'
	// latencies over the writing time).
	LatencyMillis float64 `json:"latencyMillis"`
	InFlight      float64 `json:"inFlight"`
	// ServerErrors counts the phase's writes answered with a server error (5xx),
	// which the writer retried or found landed.
	ServerErrors int `json:"serverErrors,omitempty"`
	// CPU is the CPU seconds each process used during the phase.
	CPU map[string]float64 `json:"cpuSeconds"`
	// CPUWithAftermath is the CPU seconds each process used from the phase's start
	// until its aftermath's end (-aftermath after the phase, longer at a sweep point
	// of big phases), less its quiet use over as long (the rate of a quiet window
	// just before the start): all the work the phase caused, the watch events and
	// other work the API server does after a write is answered included.
	CPUWithAftermath map[string]float64 `json:"cpuSecondsWithAftermath"`
	// Requests counts the API server's requests from the quiet window before the
	// phase to the end of its aftermath, by verb and resource (and by the HTTP code
	// of an answer other than 2xx: "DELETE configmaps 404"), from everyone (the
	// bench's reads of /metrics included).
	Requests map[string]int `json:"requests"`
	// ServerAllocatedMiB is what the API server allocated over the same span as
	// Requests (go_memstats_alloc_bytes_total): the work its garbage collector is
	// given, which a phase pays for only when a collection falls in its window.
	ServerAllocatedMiB float64 `json:"serverAllocatedMiB,omitempty"`
}

// Phases are the seconds of the create, update and delete phases.
type Phases struct {
	Create float64 `json:"createSeconds"`
	Update float64 `json:"updateSeconds"`
	Delete float64 `json:"deleteSeconds"`
}

// Restart is a start of cmsync with every replica in place: time to ready, the writes
// it made (none is the target), and, in a sweep, time and CPU until every replica
// was compared with its source.
type Restart struct {
	ReadySeconds float64 `json:"readySeconds"`
	// VerifiedSeconds is when every replica had been compared with its source (the
	// sweep measures it).
	VerifiedSeconds float64 `json:"verifiedSeconds,omitempty"`
	// VerifiedRounds are the sweep's restarts one by one; the figures above are
	// their medians.
	VerifiedRounds []float64 `json:"verifiedRounds,omitempty"`
	Writes         int64     `json:"writes"`
	// CPUSeconds is cmsync's CPU from its start until every replica was verified (less
	// spread by a busy host than the time), and CPURounds the restarts' one by one.
	CPUSeconds float64   `json:"cpuSeconds,omitempty"`
	CPURounds  []float64 `json:"cpuRounds,omitempty"`
	// ResidentMiB is cmsync's resident size at the end of a sweep's restart (20 s
	// after the start, once a finished start's memory has been returned), and
	// ResidentRounds the restarts' one by one.
	ResidentMiB    float64   `json:"residentMiB,omitempty"`
	ResidentRounds []float64 `json:"residentRounds,omitempty"`
	// Variants are the verified seconds of each restart with one of
	// -sweep-restart-variants' environments, by environment, VariantsCPUSeconds their
	// CPU and VariantsResidentMiB their resident sizes.
	Variants            map[string][]float64 `json:"variants,omitempty"`
	VariantsCPUSeconds  map[string][]float64 `json:"variantsCPUSeconds,omitempty"`
	VariantsResidentMiB map[string][]float64 `json:"variantsResidentMiB,omitempty"`
}

// Memory is cmsync's resident size.
type Memory struct {
	SteadyMiB float64 `json:"steadyMiB"`
	PeakMiB   float64 `json:"peakMiB"`
	// The steady resident size split: anonymous memory (the Go heap and runtime) and
	// the pages of the binary's file (shared, and dropped by the kernel under pressure).
	AnonMiB float64 `json:"anonMiB,omitempty"`
	FileMiB float64 `json:"fileMiB,omitempty"`
}

// Scale is the SCALE phase: S sources to every namespace, and a restart with them.
type Scale struct {
	Replicas      int     `json:"replicas"`
	FanOutSeconds float64 `json:"fanOutSeconds"`
	// FanOutCPUSeconds is the CPU time cmsync used during the fan-out.
	FanOutCPUSeconds float64 `json:"fanOutCPUSeconds"`
	PeakMiB          float64 `json:"peakMiB"`
	SteadyMiB        float64 `json:"steadyMiB"`
	Restart          Restart `json:"restart"`
}

// SweepResult is the curve: cmsync against LIMIT as the namespaces, the sources and the
// object size grow.
type SweepResult struct {
	Date       string `json:"date"`
	Machine    string `json:"machine"`
	Rounds     int    `json:"rounds"`
	CmsyncArgs string `json:"cmsyncArgs,omitempty"`
	// CmsyncFirst is -sweep-cmsync-first: cmsync went first in the odd rounds.
	CmsyncFirst bool `json:"cmsyncFirst,omitempty"`
	// ControlPlanePerRound says each round ran on a control plane of its own; sweeps
	// before it ran a point's rounds on one.
	ControlPlanePerRound bool `json:"controlPlanePerRound"`
	// ServerGCBeforePhase is -server-gc-before-phase: the API server collected its
	// garbage before each phase; sweeps before it did not.
	ServerGCBeforePhase bool `json:"serverGCBeforePhase,omitempty"`
	// WarmUp is -sweep-warm-up: each round began with cmsync's warm-up (warmUp);
	// sweeps before it measured a cmsync started for the round.
	WarmUp bool    `json:"warmUp,omitempty"`
	Points []Point `json:"points"`
}

// Point is one point of the curve: Sources sources, each replicated to all Namespaces,
// with a value of SizeBytes. LIMIT makes the very same writes with a plain client: it
// creates, updates and deletes Sources objects of that size in every namespace.
type Point struct {
	Namespaces int `json:"namespaces"`
	Sources    int `json:"sources"`
	SizeBytes  int `json:"sizeBytes"`
	Replicas   int `json:"replicas"`
	Rounds     int `json:"rounds"`
	// Limit and Cmsync are the medians of the rounds' seconds (Update is the mass
	// change: every source changed at once); Ratios divides the two.
	Limit  Phases `json:"limit"`
	Cmsync Phases `json:"cmsync"`
	Ratios Phases `json:"ratios"`
	// CPU is the medians of the CPU seconds of each process in each phase.
	LimitCPU  map[string]map[string]float64 `json:"limitCPU"`
	CmsyncCPU map[string]map[string]float64 `json:"cmsyncCPU"`
	// ServerCPUPer1000 is kube-apiserver's and etcd's CPU seconds per 1,000 writes,
	// the median over the rounds of each phase.
	LimitServerCPUPer1000  Phases `json:"limitServerCPUPer1000Writes"`
	CmsyncServerCPUPer1000 Phases `json:"cmsyncServerCPUPer1000Writes"`
	// ServerCPUPer1000WithAftermath is the same from each phase's CPU with aftermath
	// (Split.CPUWithAftermath): the measure that counts the same work for both.
	LimitServerCPUPer1000WithAftermath  Phases `json:"limitServerCPUPer1000WritesWithAftermath"`
	CmsyncServerCPUPer1000WithAftermath Phases `json:"cmsyncServerCPUPer1000WritesWithAftermath"`
	// AftermathSeconds is how long after each phase its CPU with aftermath was read.
	AftermathSeconds float64 `json:"aftermathSeconds"`
	// Memory is cmsync's resident size with the point's replicas in place.
	Memory Memory `json:"memory"`
	// TerminatedWatchers counts the watches of ConfigMaps the API server closed
	// during the point because their client did not keep up
	// (apiserver_terminated_watchers_total); cmsync's watch then resumes.
	TerminatedWatchers int     `json:"terminatedWatchers"`
	Restart            Restart `json:"restart"`
	RoundFigures
	// LimitWatchedFigures are set with -sweep-limit-watched, and with them the API
	// server's and etcd's CPU per 1,000 of LIMIT watched's writes with each phase's
	// aftermath.
	LimitWatchedFigures
	LimitWatchedServerCPUPer1000WithAftermath *Phases `json:"limitWatchedServerCPUPer1000WritesWithAftermath,omitempty"`
}

// RestartPoint is what -restarts-only measures at one count of sources.
type RestartPoint struct {
	Namespaces int     `json:"namespaces"`
	Sources    int     `json:"sources"`
	Replicas   int     `json:"replicas"`
	FanOut     float64 `json:"fanOutSeconds"`
	Memory     Memory  `json:"memory"`
	Restart    Restart `json:"restart"`
}

// RestartsResult is the file -restarts-only writes.
type RestartsResult struct {
	Date       string         `json:"date"`
	Machine    string         `json:"machine"`
	CmsyncArgs string         `json:"cmsyncArgs,omitempty"`
	Points     []RestartPoint `json:"points"`
}

// StylesResult is what the API server and etcd spend per update for each way of
// writing the same object: whether the sweep's gap in API server CPU per write
// between cmsync and LIMIT comes from how cmsync writes, or from what surrounds it.
type StylesResult struct {
	Date       string        `json:"date"`
	Machine    string        `json:"machine"`
	Namespaces int           `json:"namespaces"`
	SizeBytes  int           `json:"sizeBytes"`
	Rounds     int           `json:"rounds"`
	Operation  string        `json:"operation,omitempty"` // update (when empty) or delete
	Styles     []StyleFigure `json:"styles"`
}

// StyleFigure is one way of writing, over the rounds: the API server's and etcd's CPU
// seconds per 1,000 updates, and each round's, and the writer's own (the bench
// process, which also drains the watch of a watched style).
type StyleFigure struct {
	Name                string    `json:"name"`
	Watched             bool      `json:"watched"`
	MedianPer1000       float64   `json:"medianServerCPUPer1000Updates"`
	RoundsPer1000       []float64 `json:"roundsServerCPUPer1000Updates"`
	MedianWriterPer1000 float64   `json:"medianWriterCPUPer1000Updates"`
	RoundsWriterPer1000 []float64 `json:"roundsWriterCPUPer1000Updates"`
}

// APFResult is what the API server's flow control (API Priority and Fairness) does to
// cmsync when it throttles it hard, and what cmsync's requests do meanwhile to a
// neighbour sharing its priority level.
type APFResult struct {
	Date       string   `json:"date"`
	Machine    string   `json:"machine"`
	Namespaces int      `json:"namespaces"`
	Sources    int      `json:"sources"`
	Runs       []APFRun `json:"runs"`
}

// APFRun is one fan-out of Sources sources to Namespaces namespaces.
type APFRun struct {
	Name       string `json:"name"`
	CmsyncArgs string `json:"cmsyncArgs,omitempty"`
	// Throttled runs put cmsync and the neighbour in a priority level of one seat.
	Throttled bool `json:"throttled"`
	// ConvergeSeconds is the time until every replica was written.
	ConvergeSeconds float64 `json:"convergeSeconds"`
	// From the audit log: cmsync's write requests, those answered 429, and the most
	// in one second.
	CmsyncWrites            int `json:"cmsyncWrites"`
	CmsyncRejected          int `json:"cmsyncRejected"`
	CmsyncMaxWritesInSecond int `json:"cmsyncMaxWritesInOneSecond"`
	// The neighbour updates a ConfigMap of its own every 50 ms during the fan-out;
	// latencies include client-go's retries after a 429.
	NeighbourWrites    int     `json:"neighbourWrites"`
	NeighbourP50Millis float64 `json:"neighbourP50Millis"`
	NeighbourP99Millis float64 `json:"neighbourP99Millis"`
	NeighbourMaxMillis float64 `json:"neighbourMaxMillis"`
	NeighbourErrors    int     `json:"neighbourErrors"`
	NeighbourRejected  int     `json:"neighbourRejected"`
}

// ScopedResult is scoped mode against the default, at each count of namespaces.
type ScopedResult struct {
	Date    string        `json:"date"`
	Machine string        `json:"machine"`
	Rounds  int           `json:"rounds"`
	Points  []ScopedPoint `json:"points"`
}

// ScopedPoint is one mode at one count of namespaces: the API server's watches of
// ConfigMaps cmsync holds after the rounds (those held before it started left out),
// its time to ready, the fan-out of one source to
// every namespace and LIMIT's creates of as many objects (medians, and each round's),
// and cmsync's memory after the rounds.
type ScopedPoint struct {
	Mode               string    `json:"mode"`
	Namespaces         int       `json:"namespaces"`
	ConfigMapWatches   int       `json:"configMapWatches"`
	ReadySeconds       float64   `json:"readySeconds"`
	FanOutSeconds      float64   `json:"fanOutSeconds"`
	LimitCreateSeconds float64   `json:"limitCreateSeconds"`
	FanOutRounds       []float64 `json:"fanOutRounds"`
	LimitCreateRounds  []float64 `json:"limitCreateRounds"`
	Memory             Memory    `json:"memory"`
}
