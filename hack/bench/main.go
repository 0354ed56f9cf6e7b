// Command bench measures cmsync against the API server's own limit, on the project's
// local control plane (a real kube-apiserver and etcd): fan-out, update and cleanup
// times next to a plain 16-worker client doing the same writes, write requests while
// idle and on restart (from the API server's audit log, by user agent), time to ready,
// and the controller's memory with and without unrelated ConfigMaps, and at scale.
// `make bench` runs it; it prints a table and writes bench/results/<time>.json.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/go-logr/logr"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
)

type config struct {
	namespaces, unrelated, sources, workers, rounds, secretRounds int
	idle, aftermath                                               time.Duration
	binary, out, profile, cmsyncArgs, cmsyncEnv                   string
	sweepCmsyncFirst                                              bool
	sweepLimitWatched, sweepWarmUp                                bool
	serverGCBeforePhase                                           bool
	sweepN, sweepS, sweepSizes                                    string
	sweepBaseN, sweepRounds, sweepShortRounds, sweepRestarts      int
	restartVariants                                               string
	plot, plotDir, stylesSize, stylesOp                           string
}

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
}

// SecretResult is the Secret rounds' figures, like Result's for ConfigMaps.
type SecretResult struct {
	Rounds int    `json:"rounds"`
	Limit  Phases `json:"limit"`
	Cmsync Phases `json:"cmsync"`
	RoundFigures
	IdleWrites int64 `json:"idleWrites"`
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

type Memory struct {
	SteadyMiB float64 `json:"steadyMiB"`
	PeakMiB   float64 `json:"peakMiB"`
	// The steady resident size split: anonymous memory (the Go heap and runtime) and
	// the pages of the binary's file (shared, and dropped by the kernel under pressure).
	AnonMiB float64 `json:"anonMiB,omitempty"`
	FileMiB float64 `json:"fileMiB,omitempty"`
}

type Scale struct {
	Replicas      int     `json:"replicas"`
	FanOutSeconds float64 `json:"fanOutSeconds"`
	// FanOutCPUSeconds is the CPU time cmsync used during the fan-out.
	FanOutCPUSeconds float64 `json:"fanOutCPUSeconds"`
	PeakMiB          float64 `json:"peakMiB"`
	SteadyMiB        float64 `json:"steadyMiB"`
	Restart          Restart `json:"restart"`
}

// sourceNamespace holds the bench's sources.
const sourceNamespace = "bench-src"

// writeVerbs are the audit log's verbs of a replica write.
var writeVerbs = []string{"create", verbUpdate, "patch"}

// verbUpdate and verbDelete are the audit log's verbs of an update and a delete.
const (
	verbUpdate = "update"
	verbDelete = "delete"
)

// subcommand is one thing the bench measures (or draws), with the flags it takes.
type subcommand struct {
	about string
	flags []func(*flag.FlagSet, *config)
	run   func(config) error
}

// subcommands are the bench's: point (the default, make bench), sweep, restarts, apf,
// styles and plot.
var subcommands = map[string]subcommand{
	"point": {"one point in detail: memory, LIMIT's and cmsync's rounds, idle, restart, Secrets and SCALE; writes bench/results/<time>.json",
		[]func(*flag.FlagSet, *config){bindPointFlags}, runPoint},
	"sweep": {"the curve: fan-out, mass update, cleanup and restart against LIMIT at each point of -sweep-n, -sweep-s and -sweep-sizes, " +
		"each round on a control plane of its own; writes bench/results/sweep-<time>.json and the plots",
		[]func(*flag.FlagSet, *config){bindPointFlags, bindSweepFlags, bindPlotDir}, sweep},
	"restarts": {"only the sweep's restarts: for each of -sweep-s, cmsync fans that many sources of 1 KiB out to -sweep-base-n namespaces " +
		"on a control plane of its own, and is restarted -sweep-restarts times (with -sweep-restart-variants first); " +
		"writes bench/results/restarts-<time>.json",
		[]func(*flag.FlagSet, *config){bindPointFlags, bindSweepFlags}, restartsOnly},
	"apf": {"a 429 storm: the fan-out of -s sources to -n namespaces with cmsync's requests in a priority level of one seat, " +
		"next to a neighbour's requests; writes bench/results/apf-<time>.json",
		[]func(*flag.FlagSet, *config){bindPointFlags}, apfStorm},
	"styles": {"the API server's and etcd's CPU per update (or delete) of the same object written as LIMIT writes it, in protobuf, " +
		"with controller-runtime's client, and with metadata-only answers, each with and without a metadata watch of the objects; " +
		"-n namespaces, -rounds rounds (the first creates); writes bench/results/styles-<time>.json",
		[]func(*flag.FlagSet, *config){bindPointFlags, bindStylesFlags}, writeStyles},
	"plot": {"only draw the plots of the sweep JSON files given as arguments (a later file's point replaces an earlier one's)",
		[]func(*flag.FlagSet, *config){bindPlotDir}, func(c config) error { return drawSweep(c.plot, c.plotDir) }},
}

func main() {
	name, args := "point", os.Args[1:]
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	cmd, ok := subcommands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench: no subcommand %q; the subcommands:\n", name)
		for _, n := range slices.Sorted(maps.Keys(subcommands)) {
			fmt.Fprintf(os.Stderr, "  %-9s %s\n", n, subcommands[n].about)
		}
		os.Exit(2)
	}
	var c config
	fs := flag.NewFlagSet("bench "+name, flag.ExitOnError)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "bench %s: %s\n", name, cmd.about)
		fs.PrintDefaults()
	}
	for _, bind := range cmd.flags {
		bind(fs, &c)
	}
	_ = fs.Parse(args) // ExitOnError
	c.plot = strings.Join(fs.Args(), ",")
	if (name == "plot") != (c.plot != "") {
		fmt.Fprintf(os.Stderr, "bench %s: arguments %q: only plot takes arguments, the sweep JSON files to draw\n", name, fs.Args())
		os.Exit(2)
	}
	ctrllog.SetLogger(logr.Discard()) // the control plane's start logs nothing the bench needs
	if err := cmd.run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// bindPointFlags defines the flags of the point measured in detail (make bench), which
// the other modes share.
func bindPointFlags(fs *flag.FlagSet, c *config) {
	fs.IntVar(&c.namespaces, "n", 1000, "target namespaces")
	fs.IntVar(&c.unrelated, "u", 20000, "unrelated 1 KiB ConfigMaps")
	fs.IntVar(&c.sources, "s", 100, "sources of the SCALE phase, each to all namespaces (0 skips it)")
	fs.IntVar(&c.workers, "workers", 16, "workers of the plain client")
	fs.IntVar(&c.rounds, "rounds", 9, "rounds of LIMIT and of cmsync's FAN-OUT, UPDATE and CLEANUP; the figures are medians")
	fs.IntVar(&c.secretRounds, "secret-rounds", 9, "the same rounds with Secrets (0 skips them)")
	fs.DurationVar(&c.idle, "idle", 60*time.Second, "length of the IDLE phase")
	fs.DurationVar(&c.aftermath, "aftermath", time.Second,
		"how long after each timed phase its CPU with aftermath is read, and how long the quiet window before it is")
	fs.BoolVar(&c.serverGCBeforePhase, "server-gc-before-phase", true,
		"before each timed phase's quiet window, have the API server collect its garbage (its /debug/pprof/heap?gc=1), so that "+
			"every phase starts its CPU windows at the same point of the API server's collection cycle (see timed)")
	fs.StringVar(&c.binary, "cmsync", "bin/cmsync", "the cmsync binary")
	fs.StringVar(&c.cmsyncArgs, "cmsync-args", "", "extra flags for cmsync, space-separated (the defaults are measured without)")
	fs.StringVar(&c.cmsyncEnv, "cmsync-env", "", "extra environment for cmsync, space-separated NAME=value (e.g. GOGC=100)")
	fs.StringVar(&c.out, "out", "bench/results", "directory of the JSON results")
	fs.StringVar(
		&c.profile,
		"profile",
		"",
		"directory for profiles (go tool pprof): cmsync's heap at each memory reading, and CPU of cmsync and kube-apiserver during each round's "+
			"phases, LIMIT's and cmsync's (in a sweep: of the first round only, 20 s each, or of every round, 3 s each, at a point of short phases), and each restart",
	)
}

// bindSweepFlags defines the flags of the curve (sweep) and its restarts.
func bindSweepFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.sweepN, "sweep-n", "100,1000,10000", "namespaces of the sweep's points with one source of 1 KiB")
	fs.StringVar(&c.sweepS, "sweep-s", "1,10,100", "sources of the sweep's points with -sweep-base-n namespaces and 1 KiB")
	fs.StringVar(&c.sweepSizes, "sweep-sizes", "1Ki,100Ki,900Ki", "object sizes of the sweep's points with one source and -sweep-base-n namespaces")
	fs.IntVar(&c.sweepBaseN, "sweep-base-n", 1000, "namespaces of the -sweep-s and -sweep-sizes points")
	fs.IntVar(&c.sweepRounds, "sweep-rounds", 3, "rounds at each point of the sweep; the figures are medians")
	fs.IntVar(&c.sweepShortRounds, "sweep-short-rounds", 9,
		fmt.Sprintf("rounds at a point of fewer than %d replicas, whose phases last a few seconds at most (at least -sweep-rounds)", shortPointReplicas))
	fs.BoolVar(&c.sweepCmsyncFirst, "sweep-cmsync-first", false,
		"cmsync goes first in rounds 1, 3, … of each point and LIMIT in rounds 2, 4, … (by default LIMIT goes first in the odd rounds)")
	fs.BoolVar(&c.sweepLimitWatched, "sweep-limit-watched", false,
		"each round also runs LIMIT's writes with a metadata-only watch of them open, as cmsync's replica cache watches its replicas "+
			"(LIMIT watched; the three writers take turns going first): what telling a watcher of each write costs the API server, "+
			"which LIMIT alone does not pay")
	fs.BoolVar(&c.sweepWarmUp, "sweep-warm-up", false,
		fmt.Sprintf("in each round, before either writer's phases, cmsync fans a source out to %d namespaces, updates it and deletes it: "+
			"cmsync then writes as a process that has run, as LIMIT's client (the bench itself) has, and the fresh control plane "+
			"has served creates, updates and deletes of the kind before the first measured phase", warmUpTargets))
	fs.IntVar(&c.sweepRestarts, "sweep-restarts", 3, "restarts at each point of the sweep, after the last round's fan-out; the figures are medians")
	fs.StringVar(&c.restartVariants, "sweep-restart-variants", "",
		"before the sweep's restarts, as many with each of these environments of cmsync (';'-separated, each space-separated NAME=value, "+
			"e.g. 'GOGC=100;KUBE_FEATURE_WatchListClient=false'): to compare runtime settings on the same replicas")
}

// bindStylesFlags defines the flags of the ways of writing (styles).
func bindStylesFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.stylesSize, "styles-size", "1Ki", "payload of each object")
	fs.StringVar(&c.stylesOp, "styles-op", "update",
		"what is timed: update, or delete (each round creates the objects untimed, then deletes them; "+
			"LIMIT's two ways without a precondition, controller-runtime's typed and metadata clients on the UID)")
}

// bindPlotDir defines where the sweep's plots are drawn.
func bindPlotDir(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.plotDir, "plot-dir", "bench/plots", "directory of the sweep's PNG plots")
}

// runPoint measures one point in detail (make bench).
func runPoint(c config) error {
	b, stop, err := startBench(c, controlplane.Options{})
	if err != nil {
		return err
	}
	defer stop()
	b.res = Result{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Namespaces: c.namespaces, Unrelated: c.unrelated,
		Sources: c.sources, Memory: map[string]Memory{}, Ratios: map[string]float64{}}
	return b.run()
}

// startBench starts a control plane of its own, auditing writes, and returns a bench
// on it and the function that stops it and removes its data.
func startBench(c config, o controlplane.Options) (*bench, func(), error) {
	work, err := os.MkdirTemp("", "cmsync-bench-")
	if err != nil {
		return nil, nil, err
	}
	removeWork := func() { _ = os.RemoveAll(work) } // best effort: a leftover is in the system temp dir
	o.CRDDirs, o.AuditLog = []string{"deploy/crds"}, filepath.Join(work, "audit.log")
	env, err := controlplane.StartWith(o)
	if err != nil {
		removeWork()
		return nil, nil, err
	}
	stop := func() {
		_ = env.Stop() // best effort: its data is in the work directory, removed next
		removeWork()
	}
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		stop()
		return nil, nil, err
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // the plain client: no client-side throttle
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return &bench{c: c, env: env, cs: cs, kubeconfig: kubeconfig, audit: o.AuditLog, work: work, kind: configMaps{cs}, aftermath: c.aftermath,
		payload: strings.Repeat("x", 1024)}, stop, nil
}

type bench struct {
	c                       config
	env                     *controlplane.Env
	cs                      *kubernetes.Clientset
	kubeconfig, audit, work string
	res                     Result
	targets                 []string
	// kind is what the phases write: ConfigMaps, then Secrets.
	kind objects
	// payload is the value of each source and of each of LIMIT's objects.
	payload string
	// aftermath is how long after each timed phase its CPU with aftermath is read:
	// -aftermath, or longer at a point of big phases (measureRound).
	aftermath time.Duration
}

// run measures one point in detail: memory without and with unrelated ConfigMaps,
// LIMIT's and cmsync's rounds, IDLE and RESTART, the Secret rounds and SCALE.
func (b *bench) run() error {
	ctx := context.Background()
	step("creating %d namespaces", b.c.namespaces)
	b.createNamespaces(ctx, b.c.namespaces)
	b.memoryWithoutUnrelated(ctx)
	b.createUnrelated(ctx)
	b.rounds(ctx)
	b.secretRounds(ctx)
	if b.c.sources > 0 {
		b.scale(ctx)
	}
	b.res.Ratios["fanOut/limitCreate"] = b.res.Cmsync.Create / b.res.Limit.Create
	b.res.Ratios["update/limitUpdate"] = b.res.Cmsync.Update / b.res.Limit.Update
	b.res.Ratios["cleanup/limitDelete"] = b.res.Cmsync.Delete / b.res.Limit.Delete
	b.print()
	return b.save()
}

// memoryWithoutUnrelated reads cmsync's memory with U=0: the same fan-out, update and
// idle as with U unrelated ConfigMaps later, so the two readings differ only by U; and
// the same with --secrets=enabled and no Secret labelled: what turning Secrets on costs
// a cluster that does not use them (its Secrets are not cached: only labelled ones are).
func (b *bench) memoryWithoutUnrelated(ctx context.Context) {
	for _, run := range []struct{ name, source, flag string }{
		{"u0", "mem0", ""}, {"u0-secrets-enabled", "mem0s", "--secrets=enabled"},
	} {
		step("MEMORY with U=0 %s", run.flag)
		var flags []string
		if run.flag != "" {
			flags = append(flags, run.flag)
		}
		proc := b.startCmsync(flags...)
		b.fanOut(ctx, run.source, 1)
		b.update(ctx, run.source, 1)
		time.Sleep(5*time.Second + b.c.idle)
		b.res.Memory[run.name] = proc.memory()
		if run.flag == "" {
			b.heapProfile(proc, run.name)
		}
		b.cleanup(ctx, run.source, 1)
		proc.stop()
	}
}

// createUnrelated creates the U unrelated ConfigMaps, spread over the namespaces.
func (b *bench) createUnrelated(ctx context.Context) {
	step("creating %d unrelated ConfigMaps", b.c.unrelated)
	must(parallel(b.c.workers, b.c.unrelated, func(i int) error {
		_, err := b.cs.CoreV1().ConfigMaps(b.targets[i%len(b.targets)]).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%05d", i)}, Data: map[string]string{"v": b.payload}}, metav1.CreateOptions{})
		return err
	}))
}

// rounds runs LIMIT and cmsync in turns, round after round, so that both meet the same
// API server moods (a single round's ratio moves by tens of percent here); the last
// round's source stays for IDLE and RESTART.
func (b *bench) rounds(ctx context.Context) {
	proc := b.startCmsync()
	for r := range b.c.rounds {
		step("round %d of %d: LIMIT (a plain client, %d workers, no client-side throttle), then cmsync's FAN-OUT, UPDATE, CLEANUP",
			r+1, b.c.rounds, b.c.workers)
		limit := b.limit(ctx, 1, func(phase string) func() {
			return b.cpuProfiles(ctx, proc, fmt.Sprintf("limit-%s-r%02d", phase, r), phaseProfileSeconds)
		})
		b.res.LimitRounds = append(b.res.LimitRounds, limit.phases())
		b.res.LimitBreakdown = append(b.res.LimitBreakdown, b.breakdown(limit, b.isLimitWrite))
		name := fmt.Sprintf("app-r%02d", r)
		var round windows
		round.create = b.profiledPhase(ctx, proc, fmt.Sprintf("fanout-r%02d", r), func() window { return b.fanOut(ctx, name, 1) })
		round.update = b.profiledPhase(ctx, proc, fmt.Sprintf("update-r%02d", r), func() window { return b.update(ctx, name, 1) })
		if r == b.c.rounds-1 {
			proc = b.idleAndRestart(proc)
			step("CLEANUP")
		}
		round.delete = b.profiledPhase(ctx, proc, fmt.Sprintf("cleanup-r%02d", r), func() window { return b.cleanup(ctx, name, 1) })
		b.res.CmsyncRounds = append(b.res.CmsyncRounds, round.phases())
		b.res.CmsyncBreakdown = append(b.res.CmsyncBreakdown, b.breakdown(round, b.isCmsyncReplicaWrite))
	}
	proc.stop()
	b.res.Rounds = b.c.rounds
	b.res.Limit, b.res.Cmsync = medians(b.res.LimitRounds), medians(b.res.CmsyncRounds)
}

// profiledPhase runs a phase of cmsync's with its CPU profiles (with -profile).
func (b *bench) profiledPhase(ctx context.Context, proc *process, name string, run func() window) window {
	profiled := b.cpuProfiles(ctx, proc, name, phaseProfileSeconds)
	defer profiled()
	return run()
}

// idleAndRestart counts cmsync's writes while idle with every replica in sync, reads
// its memory, and restarts it; it returns the restarted process.
func (b *bench) idleAndRestart(proc *process) *process {
	step("IDLE for %s", b.c.idle)
	time.Sleep(5 * time.Second) // let the passes our own writes triggered finish
	from := time.Now()
	time.Sleep(b.c.idle)
	b.res.IdleWrites = b.cmsyncWrites(from, time.Now())
	b.res.IdleSeconds = b.c.idle.Seconds()
	b.res.Memory["u"+strconv.Itoa(b.c.unrelated)] = proc.memory()
	step("RESTART in sync")
	proc.stop()
	proc, b.res.Restart = b.restart()
	return proc
}

// scale fans S sources out to every namespace: time, cmsync's CPU and memory, and a
// restart with all those replicas in sync.
func (b *bench) scale(ctx context.Context) {
	step("SCALE: %d sources to %d namespaces", b.c.sources, b.c.namespaces)
	proc := b.startCmsync()
	b.res.Scale.Replicas = b.c.sources * b.c.namespaces
	cpu := proc.cpuSeconds()
	b.res.Scale.FanOutSeconds = b.fanOut(ctx, "scale", b.c.sources).seconds()
	b.res.Scale.FanOutCPUSeconds = proc.cpuSeconds() - cpu
	time.Sleep(10 * time.Second)
	m := proc.memory()
	b.heapProfile(proc, "scale")
	b.res.Scale.PeakMiB, b.res.Scale.SteadyMiB = m.PeakMiB, m.SteadyMiB
	proc.stop()
	proc, b.res.Scale.Restart = b.restart()
	proc.stop()
}

// medians are the per-phase medians of rounds.
func medians(rounds []Phases) Phases {
	median := func(get func(Phases) float64) float64 { return medianOf(rounds, get) }
	return Phases{
		Create: median(func(p Phases) float64 { return p.Create }),
		Update: median(func(p Phases) float64 { return p.Update }),
		Delete: median(func(p Phases) float64 { return p.Delete }),
	}
}

func cpuList(cpu map[string]float64) string {
	parts := make([]string, 0, len(cpu))
	for _, name := range slices.Sorted(maps.Keys(cpu)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", name, cpu[name]))
	}
	return strings.Join(parts, ", ")
}

// medianOf is the median of value over rounds: of an even number, the mean of the
// middle two (of two rounds, one with LIMIT first and one with cmsync first, their
// mean rather than the larger).
func medianOf[R any](rounds []R, value func(R) float64) float64 {
	v := make([]float64, len(rounds))
	for i, r := range rounds {
		v[i] = value(r)
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 && n > 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// medianSplit is the field-by-field median of one phase's splits.
func medianSplit(rounds []Breakdown, get func(Breakdown) Split) Split {
	if len(rounds) == 0 {
		return Split{}
	}
	median := func(field func(Split) float64) float64 {
		return medianOf(rounds, func(b Breakdown) float64 { return field(get(b)) })
	}
	cpu := map[string]float64{}
	for _, r := range rounds {
		for name := range get(r).CPU {
			cpu[name] = median(func(s Split) float64 { return s.CPU[name] })
		}
	}
	return Split{
		BeforeFirstWrite: median(func(s Split) float64 { return s.BeforeFirstWrite }),
		Writing:          median(func(s Split) float64 { return s.Writing }),
		AfterLastWrite:   median(func(s Split) float64 { return s.AfterLastWrite }),
		Writes:           int(median(func(s Split) float64 { return float64(s.Writes) })),
		LatencyMillis:    median(func(s Split) float64 { return s.LatencyMillis }),
		InFlight:         median(func(s Split) float64 { return s.InFlight }),
		CPU:              cpu,
	}
}

// secretRounds runs the rounds again with Secrets: LIMIT writes Secrets, cmsync runs
// with --secrets=enabled and replicates a Secret source; then an idle minute.
func (b *bench) secretRounds(ctx context.Context) {
	if b.c.secretRounds == 0 {
		return
	}
	b.kind = secrets{b.cs}
	defer func() { b.kind = configMaps{b.cs} }()
	res := &b.res.Secrets
	proc := b.startCmsync("--secrets=enabled")
	noProfile := func(string) func() { return func() {} }
	for r := range b.c.secretRounds {
		step("Secret round %d of %d: LIMIT, then cmsync's FAN-OUT, UPDATE, CLEANUP", r+1, b.c.secretRounds)
		limit := b.limit(ctx, 1, noProfile)
		res.LimitRounds = append(res.LimitRounds, limit.phases())
		res.LimitBreakdown = append(res.LimitBreakdown, b.breakdown(limit, b.isLimitWrite))
		name := fmt.Sprintf("secret-r%02d", r)
		var round windows
		round.create = b.fanOut(ctx, name, 1)
		round.update = b.update(ctx, name, 1)
		round.delete = b.cleanup(ctx, name, 1)
		res.CmsyncRounds = append(res.CmsyncRounds, round.phases())
		res.CmsyncBreakdown = append(res.CmsyncBreakdown, b.breakdown(round, b.isCmsyncReplicaWrite))
	}
	step("Secret IDLE for %s", b.c.idle)
	b.fanOut(ctx, "secret-idle", 1)
	time.Sleep(5 * time.Second)
	from := time.Now()
	time.Sleep(b.c.idle)
	res.IdleWrites = b.cmsyncWrites(from, time.Now())
	b.cleanup(ctx, "secret-idle", 1)
	proc.stop()
	res.Rounds = b.c.secretRounds
	res.Limit, res.Cmsync = medians(res.LimitRounds), medians(res.CmsyncRounds)
	b.res.Ratios["secret fanOut/limitCreate"] = res.Cmsync.Create / res.Limit.Create
	b.res.Ratios["secret update/limitUpdate"] = res.Cmsync.Update / res.Limit.Update
	b.res.Ratios["secret cleanup/limitDelete"] = res.Cmsync.Delete / res.Limit.Delete
}

// limit times a plain client creating, updating and deleting perNamespace objects in
// each namespace: the very writes of perNamespace sources' fan-out, update and cleanup.
// Each object is what cmsync's replica of a bench source is: the same data keys and
// values, and as many labels and annotations of the same sizes (under keys of the
// bench's own, which cmsync's caches never select), because the API server's cost of
// a write grows with the fields it tracks; an update changes "v" as the sources' do,
// and with it a 40-character label, as a replica's content-hash label changes.
func (b *bench) limit(ctx context.Context, perNamespace int, profile func(phase string) (wait func())) windows {
	return b.limitNamed(ctx, limitName, perNamespace, profile)
}

// limitName and limitWatchedName name LIMIT's objects, and those of LIMIT watched
// (-sweep-limit-watched): name-000, name-001, …
const (
	limitName        = "limit"
	limitWatchedName = "limitw"
)

// limitNamed is limit with the objects named name-000, name-001, ….
func (b *bench) limitNamed(ctx context.Context, name string, perNamespace int, profile func(phase string) (wait func())) windows {
	var p windows
	n := perNamespace * len(b.targets)
	object := func(i int, v string) object {
		return b.replicaShaped(b.targets[i%len(b.targets)], fmt.Sprintf("%s-%03d", name, i/len(b.targets)), v1alpha1.ManagedByValue, v)
	}
	wait := profile("create")
	p.create = b.timed(func() error {
		return parallel(b.c.workers, n, func(i int) error {
			return retryServerErrors(func() error { return b.kind.create(ctx, object(i, "1")) }, apierrors.IsAlreadyExists)
		})
	})
	wait()
	wait = profile("update")
	p.update = b.timed(func() error {
		return parallel(b.c.workers, n, func(i int) error {
			return retryServerErrors(func() error { return b.kind.update(ctx, object(i, "2")) }, nil)
		})
	})
	wait()
	wait = profile("delete")
	p.delete = b.timed(func() error {
		return parallel(b.c.workers, n, func(i int) error {
			o := object(i, "")
			return retryServerErrors(func() error { return b.kind.delete(ctx, o.Namespace, o.Name) }, apierrors.IsNotFound)
		})
	})
	wait()
	return p
}

// retryServerErrors runs write, and again as a plain client would while the API server
// answers with a server error: under 900 KiB writes etcd sometimes answers "request
// timed out", at times after the write landed. A retry answered with an error that
// landed reports (AlreadyExists for a create, NotFound for a delete) means the first
// try landed.
func retryServerErrors(write func() error, landed func(error) bool) error {
	tried := false
	return retry.OnError(retry.DefaultBackoff, isServerError, func() error {
		err := write()
		if tried && landed != nil && landed(err) {
			return nil
		}
		tried = true
		return err
	})
}

func isServerError(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
}

// replicaShaped is an object of a replica's shape under the bench's own keys: the
// data keys of a bench source, and as many labels and annotations of the same sizes,
// the third label changing with v as a replica's content-hash label changes with its
// content. managedBy is its first label's value.
func (b *bench) replicaShaped(namespace, name, managedBy, v string) object {
	return object{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels: map[string]string{
				"bench.limit/managed-by": managedBy, "bench.limit/source-id": strings.Repeat("0", 40),
				"bench.limit/content-hash": strings.Repeat(v, 40),
			},
			Annotations: map[string]string{"bench.limit/source": sourceNamespace + "/" + name}},
		data: map[string]string{"v": v, "payload": b.payload},
	}
}

func (b *bench) source(name string) object {
	return object{ObjectMeta: metav1.ObjectMeta{Namespace: sourceNamespace, Name: name,
		Labels:      map[string]string{"cmsync.io/replicate": "true"},
		Annotations: map[string]string{"cmsync.io/target-namespaces": "bench-[0-9]*"}},
		data: map[string]string{"v": "1", "payload": b.payload}}
}

// object is a ConfigMap's or a Secret's metadata and string data.
type object struct {
	metav1.ObjectMeta
	data map[string]string
}

// objects writes and reads the bench's objects of one kind through the typed client.
type objects interface {
	// resource names the kind's resource as the audit log does.
	resource() string
	create(ctx context.Context, o object) error
	update(ctx context.Context, o object) error
	delete(ctx context.Context, namespace, name string) error
	// managedValues returns the "v" of every object labelled as cmsync's, by namespace
	// and name.
	managedValues(ctx context.Context) (map[string]string, error)
}

type configMaps struct{ cs *kubernetes.Clientset }

func (configMaps) resource() string { return "configmaps" }

func (k configMaps) create(ctx context.Context, o object) error {
	_, err := k.cs.CoreV1().ConfigMaps(o.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: o.ObjectMeta, Data: o.data}, metav1.CreateOptions{})
	return err
}

func (k configMaps) update(ctx context.Context, o object) error {
	_, err := k.cs.CoreV1().ConfigMaps(o.Namespace).Update(ctx, &corev1.ConfigMap{ObjectMeta: o.ObjectMeta, Data: o.data}, metav1.UpdateOptions{})
	return err
}

func (k configMaps) delete(ctx context.Context, namespace, name string) error {
	return k.cs.CoreV1().ConfigMaps(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

func (k configMaps) managedValues(ctx context.Context) (map[string]string, error) {
	list, err := k.cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=cmsync"})
	if err != nil {
		return nil, err
	}
	values := make(map[string]string, len(list.Items))
	for _, cm := range list.Items {
		values[cm.Namespace+"/"+cm.Name] = cm.Data["v"]
	}
	return values, nil
}

// secrets writes Opaque Secrets; their values go as stringData, as a user's would.
type secrets struct{ cs *kubernetes.Clientset }

func (secrets) resource() string { return "secrets" }

func (k secrets) secret(o object) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: o.ObjectMeta, Type: corev1.SecretTypeOpaque, StringData: o.data}
}

func (k secrets) create(ctx context.Context, o object) error {
	_, err := k.cs.CoreV1().Secrets(o.Namespace).Create(ctx, k.secret(o), metav1.CreateOptions{})
	return err
}

func (k secrets) update(ctx context.Context, o object) error {
	_, err := k.cs.CoreV1().Secrets(o.Namespace).Update(ctx, k.secret(o), metav1.UpdateOptions{})
	return err
}

func (k secrets) delete(ctx context.Context, namespace, name string) error {
	return k.cs.CoreV1().Secrets(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

func (k secrets) managedValues(ctx context.Context) (map[string]string, error) {
	list, err := k.cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=cmsync"})
	if err != nil {
		return nil, err
	}
	values := make(map[string]string, len(list.Items))
	for _, s := range list.Items {
		values[s.Namespace+"/"+s.Name] = string(s.Data["v"])
	}
	return values, nil
}

// fanOut creates count sources named prefix-i and times until cmsync has written every
// replica (the API server's audit log says when each write completed), then checks
// that every replica exists with the right content.
func (b *bench) fanOut(ctx context.Context, prefix string, count int) window {
	want := count * len(b.targets)
	check := func() error { return b.replicasAre(ctx, prefix, want, "1") }
	w := b.timedUntilWritten(prefix, want, writeVerbs, func() error {
		return parallel(b.c.workers, count, func(i int) error {
			return b.kind.create(ctx, b.source(fmt.Sprintf("%s-%03d", prefix, i)))
		})
	}, check)
	must(check())
	return w
}

// update changes the sources prefix-000 to prefix-<count-1> at once (a mass change, as
// a CA rotation is) and times until cmsync has rewritten every replica, then checks them.
func (b *bench) update(ctx context.Context, prefix string, count int) window {
	want := count * len(b.targets)
	check := func() error { return b.replicasAre(ctx, prefix, want, "2") }
	w := b.timedUntilWritten(prefix, want, []string{verbUpdate, "patch"}, func() error {
		return parallel(b.c.workers, count, func(i int) error {
			src := b.source(fmt.Sprintf("%s-%03d", prefix, i))
			src.data["v"] = "2"
			return b.kind.update(ctx, src)
		})
	}, check)
	must(check())
	return w
}

// cleanup deletes the sources prefix-000 to prefix-<count-1> and times until cmsync has
// deleted every replica, then checks that none is left.
func (b *bench) cleanup(ctx context.Context, prefix string, count int) window {
	check := func() error { return b.replicasAre(ctx, prefix, 0, "") }
	w := b.timedUntilWritten(prefix, count*len(b.targets), []string{verbDelete}, func() error {
		return parallel(b.c.workers, count, func(i int) error {
			return b.kind.delete(ctx, sourceNamespace, fmt.Sprintf("%s-%03d", prefix, i))
		})
	}, check)
	must(check())
	return w
}

// done reports whether a write reached the API server's storage: a success, or a
// delete answered 404 (a retry of a delete that had completed but timed out).
func done(e auditEvent) bool {
	return e.ResponseStatus.Code < 300 || e.Verb == verbDelete && e.ResponseStatus.Code == 404
}

// unsureAfter is how long the audit log must stay quiet, with every replica's write
// logged and some of them answered with a server error, before the bench reads the
// replicas to learn whether those writes landed.
const unsureAfter = 2 * time.Second

// timedUntilWritten times fn and stops the clock when the audit log shows that
// cmsync's successful writes of the given verbs reached want distinct replicas named
// prefix*: at the API server's completion of the last one, as LIMIT's clock stops at
// its last response. No watch of the bench's own adds work to the API server while
// cmsync writes; the caller then reads the result once. Nor does the bench spend CPU
// the API server could use: while cmsync writes, it only picks out the lines that may
// be its writes, and parses them once there are enough of them to make up want. Doing
// both as each line came cost it 0.1 ms of CPU per write of cmsync's, a third of what
// LIMIT's client spends on its writes (perf, 1,000 namespaces), on the same two cores.
//
// A write answered with a server error may still have landed: under a 900 KiB cleanup
// etcd answered one delete "request timed out" after deleting the replica, and cmsync,
// whose cache then showed it gone, had nothing left to retry. Once every replica's
// write is logged and the log has stayed quiet for unsureAfter, the bench asks landed
// whether the replicas are as wanted, and stops the clock at the last logged write if
// so; if not, cmsync has a write to retry and the bench keeps waiting.
func (b *bench) timedUntilWritten(prefix string, want int, verbs []string, fn func() error, landed func() error) window {
	tail := b.openAudit(true, []byte(`"userAgent":"cmsync`), []byte(`"name":"`+prefix))
	defer tail.close()
	seen := &replicaWrites{b: b, prefix: prefix, verbs: verbs, written: map[string]bool{}, unsure: map[string]bool{}}
	w := b.timed(func() error {
		if err := fn(); err != nil {
			return err
		}
		return seen.waitFor(tail, want, landed)
	})
	w.end = seen.last
	return w
}

// replicaWrites follows, in the audit log, cmsync's writes of one phase's replicas
// (named with prefix, by one of verbs): those done, those answered with a server error
// (unsure), and the lines read but not parsed yet (pending).
type replicaWrites struct {
	b               *bench
	prefix          string
	verbs           []string
	written, unsure map[string]bool
	pending         [][]byte
	// lastEvent is when the log last showed one of these writes; last is the
	// completion time of the last one counted.
	lastEvent, last time.Time
}

// waitFor reads the log until want replicas are written, or, once every write is
// logged and the log has stayed quiet for unsureAfter, until landed says the replicas
// are as wanted; at most 30 minutes.
func (s *replicaWrites) waitFor(tail *auditTail, want int, landed func() error) error {
	s.lastEvent = time.Now()
	deadline := s.lastEvent.Add(30 * time.Minute)
	for len(s.written) < want {
		s.read(tail, want)
		if len(s.unsure) > 0 && len(s.written)+len(s.unsure) >= want && time.Since(s.lastEvent) > unsureAfter {
			err := landed()
			step("%d of cmsync's writes of %s were answered with a server error; the replicas read as wanted: %v", len(s.unsure), s.prefix, err == nil)
			if err == nil {
				return nil
			}
			s.lastEvent = time.Now()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cmsync wrote %d of %d replicas of %s in 30 minutes", len(s.written), want, s.prefix)
		}
		time.Sleep(auditPoll)
	}
	return nil
}

// read picks out the new lines that may be the writes, and parses them once there are
// enough to make up want.
func (s *replicaWrites) read(tail *auditTail, want int) {
	tail.lines(func(line []byte) {
		if hasVerb(line, s.verbs) {
			s.pending = append(s.pending, bytes.Clone(line))
			s.lastEvent = time.Now()
		}
	})
	if len(s.written)+len(s.unsure)+len(s.pending) < want {
		return
	}
	for _, line := range s.pending {
		if e, ok := parseAudit(line); ok {
			s.check(e)
		}
	}
	s.pending = s.pending[:0]
}

// check counts one logged write of a replica, done or answered with a server error.
func (s *replicaWrites) check(e auditEvent) {
	key := e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
	if !s.b.isCmsyncReplicaWrite(e) || !strings.HasPrefix(e.ObjectRef.Name, s.prefix) || !slices.Contains(s.verbs, e.Verb) || s.written[key] {
		return
	}
	s.lastEvent = time.Now()
	switch {
	case done(e):
		s.written[key] = true
		delete(s.unsure, key)
	case e.ResponseStatus.Code >= 500:
		s.unsure[key] = true
	default:
		return
	}
	if e.Completed.After(s.last) {
		s.last = e.Completed
	}
}

// auditPoll is how often timedUntilWritten reads the audit log while cmsync writes. The
// clock stops at the completion time the log gives, so the poll only decides when the
// bench notices; each wake-up of the bench costs CPU on the cores the API server
// needs (at 5 ms, about a third of the bench's CPU in cmsync's phases went to the Go
// scheduler's wake-ups).
const auditPoll = 20 * time.Millisecond

// replicasAre reports an error unless exactly want replicas named prefix* exist, each
// with "v" equal to value.
func (b *bench) replicasAre(ctx context.Context, prefix string, want int, value string) error {
	values, err := b.kind.managedValues(ctx)
	if err != nil {
		return err
	}
	found, right := 0, 0
	for key, v := range values {
		if _, name, _ := strings.Cut(key, "/"); strings.HasPrefix(name, prefix) {
			found++
			if v == value {
				right++
			}
		}
	}
	if found != want || right != want {
		return fmt.Errorf("after cmsync's last write: %d replicas of %s, %d with v=%q; want %d", found, prefix, right, value, want)
	}
	return nil
}

// restart starts cmsync with everything in sync and reports time to ready and the
// writes it made in the 20 s after.
func (b *bench) restart() (*process, Restart) {
	start := time.Now()
	proc := b.startCmsync()
	ready := time.Since(start).Seconds()
	time.Sleep(20 * time.Second)
	return proc, Restart{ReadySeconds: ready, Writes: b.cmsyncWrites(start, time.Now())}
}

// cmsyncWrites counts the write requests the API server audited from cmsync between
// from and to.
func (b *bench) cmsyncWrites(from, to time.Time) int64 {
	var n int64
	b.auditedWrites(func(e auditEvent) {
		// Lease renewals of leader election are not cmsync's work; it runs without it here.
		if strings.HasPrefix(e.UserAgent, "cmsync") && e.Received.After(from) && e.Received.Before(to) && e.ObjectRef.Resource != "leases" {
			n++
		}
	})
	return n
}

// isLimitWrite picks the plain client's writes of the LIMIT phases.
func (b *bench) isLimitWrite(e auditEvent) bool { return b.isWriteOf(limitName, e) }

// isWriteOf picks the plain client's writes of the objects limitNamed names name-….
func (b *bench) isWriteOf(name string, e auditEvent) bool {
	return e.ObjectRef.Resource == b.kind.resource() && strings.HasPrefix(e.ObjectRef.Name, name+"-")
}

// isCmsyncReplicaWrite picks cmsync's writes to replicas (not its status patches of
// the source).
func (b *bench) isCmsyncReplicaWrite(e auditEvent) bool {
	return strings.HasPrefix(e.UserAgent, "cmsync") && e.ObjectRef.Resource == b.kind.resource() && e.ObjectRef.Namespace != sourceNamespace
}

// breakdown splits each phase of a round by the audit log's timestamps of the writes
// that pick chooses.
func (b *bench) breakdown(w windows, pick func(auditEvent) bool) Breakdown {
	type span struct {
		first, last  time.Time
		writes       int
		serverErrors int
		busy         time.Duration
	}
	spans := make([]span, 3)
	phases := []window{w.create, w.update, w.delete}
	b.auditedWrites(func(e auditEvent) {
		if !pick(e) {
			return
		}
		for i, p := range phases {
			if e.Received.Before(p.start) || e.Received.After(p.end) {
				continue
			}
			s := &spans[i]
			if s.writes == 0 || e.Received.Before(s.first) {
				s.first = e.Received
			}
			if e.Completed.After(s.last) {
				s.last = e.Completed
			}
			s.writes++
			s.busy += e.Completed.Sub(e.Received)
			if e.ResponseStatus.Code >= 500 {
				s.serverErrors++
			}
		}
	})
	split := func(i int) Split {
		s, p := spans[i], phases[i]
		if s.writes == 0 {
			return Split{CPU: p.cpu, CPUWithAftermath: p.cpuWithAftermath, Requests: p.requests, ServerAllocatedMiB: p.serverAllocatedMiB}
		}
		writing := s.last.Sub(s.first)
		return Split{BeforeFirstWrite: s.first.Sub(p.start).Seconds(), Writing: writing.Seconds(),
			AfterLastWrite: p.end.Sub(s.last).Seconds(), Writes: s.writes,
			LatencyMillis: float64(s.busy.Milliseconds()) / float64(s.writes), InFlight: s.busy.Seconds() / max(writing.Seconds(), 1e-9),
			ServerErrors: s.serverErrors, CPU: p.cpu, CPUWithAftermath: p.cpuWithAftermath, Requests: p.requests,
			ServerAllocatedMiB: p.serverAllocatedMiB}
	}
	return Breakdown{Create: split(0), Update: split(1), Delete: split(2)}
}

type process struct {
	metrics string
	cmd     *exec.Cmd
	peakRSS atomic.Int64
	done    chan struct{}
}

// startCmsync runs the binary with its default flags and waits for /readyz.
func (b *bench) startCmsync(extraArgs ...string) *process {
	return b.startCmsyncWith("", extraArgs...)
}

// startCmsyncWith is startCmsync with env added to cmsync's environment.
func (b *bench) startCmsyncWith(env string, extraArgs ...string) *process {
	metrics, health := freePort(), freePort()
	args := append([]string{"--kubeconfig=" + b.kubeconfig, "--metrics-bind-address=" + metrics, "--health-probe-bind-address=" + health}, extraArgs...)
	if b.c.profile != "" {
		args = append(args, "--profiling")
	}
	args = append(args, strings.Fields(b.c.cmsyncArgs)...)
	cmd := exec.Command(b.c.binary, args...)
	// cmsync dies with the bench, also when a failed check exits it at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(append(os.Environ(), strings.Fields(b.c.cmsyncEnv)...), strings.Fields(env)...)
	logFile, err := os.Create(filepath.Join(b.work, fmt.Sprintf("cmsync-%d.log", time.Now().UnixNano())))
	must(err)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	must(cmd.Start())
	p := &process{cmd: cmd, done: make(chan struct{}), metrics: metrics}
	go p.sampleRSS()
	for {
		resp, err := http.Get("http://" + health + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *process) sampleRSS() {
	for {
		select {
		case <-p.done:
			return
		case <-time.After(100 * time.Millisecond):
			if _, hwm := memoryKiB(p.cmd.Process.Pid); hwm > p.peakRSS.Load() {
				p.peakRSS.Store(hwm)
			}
		}
	}
}

// heapProfile saves cmsync's heap profile, when profiling was asked for.
func (b *bench) heapProfile(p *process, name string) {
	if b.c.profile == "" {
		return
	}
	resp, err := http.Get("http://" + p.metrics + "/debug/pprof/heap")
	must(err)
	defer func() { _ = resp.Body.Close() }()
	must(os.MkdirAll(b.c.profile, 0o755))
	f, err := os.Create(filepath.Join(b.c.profile, name+".pprof"))
	must(err)
	defer func() { _ = f.Close() }() // read-only: nothing to lose
	_, err = io.Copy(f, resp.Body)
	must(err)
}

// phaseProfileSeconds is the length of the CPU profiles of a phase of `make bench`:
// at 1,000 namespaces it lasts a few seconds.
const phaseProfileSeconds = 3

// cpuProfiles starts CPU profiles of cmsync and of kube-apiserver lasting seconds,
// when profiling was asked for, and returns a function that waits for them to be saved.
func (b *bench) cpuProfiles(ctx context.Context, p *process, name string, seconds int) (wait func()) {
	if b.c.profile == "" {
		return func() {}
	}
	must(os.MkdirAll(b.c.profile, 0o755))
	var wg sync.WaitGroup
	save := func(file string, get func() ([]byte, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, err := get()
			must(err)
			must(os.WriteFile(filepath.Join(b.c.profile, file), data, 0o644))
		}()
	}
	save(name+"-cmsync.cpu.pprof", func() ([]byte, error) {
		// cmsync serves /readyz before its metrics server listens, if only just.
		var resp *http.Response
		var err error
		for tries := 0; tries < 50; tries++ {
			if resp, err = http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.metrics, seconds)); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			return nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		return io.ReadAll(resp.Body)
	})
	save(name+"-apiserver.cpu.pprof", func() ([]byte, error) {
		return b.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(seconds)).DoRaw(ctx)
	})
	time.Sleep(50 * time.Millisecond) // let both profiles start before the phase does
	return wg.Wait
}

func (p *process) memory() Memory {
	rss, peak := memoryKiB(p.cmd.Process.Pid)
	anon, file := residentSplitKiB(p.cmd.Process.Pid)
	return Memory{
		SteadyMiB: float64(rss) / 1024,
		PeakMiB:   float64(max(p.peakRSS.Load(), peak)) / 1024,
		AnonMiB:   float64(anon) / 1024,
		FileMiB:   float64(file) / 1024,
	}
}

// residentSplitKiB reads RssAnon and RssFile from /proc/<pid>/status (procfs does
// not parse them).
func residentSplitKiB(pid int) (anon, file int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, value, _ := strings.Cut(line, ":")
		kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch name {
		case "RssAnon":
			anon = kib
		case "RssFile":
			file = kib
		}
	}
	return anon, file
}

func (p *process) stop() {
	close(p.done)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_, _ = p.cmd.Process.Wait()
}

func (p *process) cpuSeconds() float64 { return cpuSeconds(p.cmd.Process.Pid) }

// cpuSeconds is the CPU time a process has used so far, user and system, read from
// its CPU clock to the nanosecond: /proc/<pid>/stat counts in 10 ms ticks, a tenth of
// a 100-write phase's API server CPU. The clock ID of another process's CPU clock is
// the kernel's encoding, which glibc's clock_getcpuclockid(3) computes and no Go
// library offers: the PID's complement shifted left by three, with CPUCLOCK_SCHED (2).
func cpuSeconds(pid int) float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(int32(^pid<<3|2), &ts); err != nil {
		return 0
	}
	return float64(ts.Nano()) / 1e9
}

// stolenSeconds is the CPU time the hypervisor gave to others while this machine's
// CPUs wanted to run (/proc/stat's steal column, summed over CPUs): phases hit by it
// are slower for reasons outside the bench.
func stolenSeconds() float64 {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0
	}
	stat, err := fs.Stat()
	if err != nil {
		return 0
	}
	return stat.CPUTotal.Steal
}

// memoryKiB returns a process's resident size now and at its peak, in KiB.
func memoryKiB(pid int) (rss, peak int64) {
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return 0, 0
	}
	status, err := proc.NewStatus()
	if err != nil {
		return 0, 0
	}
	return int64(status.VmRSS / 1024), int64(status.VmHWM / 1024)
}

func (b *bench) print() {
	r := b.res
	fmt.Printf("\ncmsync benchmark — %s, N=%d namespaces, U=%d unrelated ConfigMaps\n", r.Machine, r.Namespaces, r.Unrelated)
	fmt.Printf("%-34s %10s %10s %8s   (medians of %d rounds)\n", "phase", "cmsync", "LIMIT", "ratio", r.Rounds)
	fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "FAN-OUT (create N replicas)", r.Cmsync.Create, r.Limit.Create, r.Ratios["fanOut/limitCreate"])
	fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "UPDATE (N replicas follow)", r.Cmsync.Update, r.Limit.Update, r.Ratios["update/limitUpdate"])
	fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "CLEANUP (N replicas deleted)", r.Cmsync.Delete, r.Limit.Delete, r.Ratios["cleanup/limitDelete"])
	fmt.Println("where the time went (medians; seconds before the first write, writing, after the last write):")
	for _, ph := range phaseSplits {
		c, l := medianSplit(r.CmsyncBreakdown, ph.get), medianSplit(r.LimitBreakdown, ph.get)
		fmt.Printf(
			"  %-6s cmsync %.2f + %.2f + %.2f (%d writes, %.1f ms each, %.1f in flight)   LIMIT %.2f + %.2f + %.2f (%d writes, %.1f ms each, %.1f in flight)\n",
			ph.name,
			c.BeforeFirstWrite,
			c.Writing,
			c.AfterLastWrite,
			c.Writes,
			c.LatencyMillis,
			c.InFlight,
			l.BeforeFirstWrite,
			l.Writing,
			l.AfterLastWrite,
			l.Writes,
			l.LatencyMillis,
			l.InFlight,
		)
		fmt.Printf("  %-6s CPU seconds: cmsync phase %s   LIMIT phase %s\n", "", cpuList(c.CPU), cpuList(l.CPU))
	}
	if s := r.Secrets; s.Rounds > 0 {
		fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx   (Secrets, medians of %d rounds)\n", "SECRET FAN-OUT", s.Cmsync.Create, s.Limit.Create,
			r.Ratios["secret fanOut/limitCreate"], s.Rounds)
		fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "SECRET UPDATE", s.Cmsync.Update, s.Limit.Update, r.Ratios["secret update/limitUpdate"])
		fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "SECRET CLEANUP", s.Cmsync.Delete, s.Limit.Delete, r.Ratios["secret cleanup/limitDelete"])
		fmt.Printf("%-34s %10d\n", fmt.Sprintf("SECRET IDLE writes in %.0fs", r.IdleSeconds), s.IdleWrites)
	}
	fmt.Printf("%-34s %10d\n", fmt.Sprintf("IDLE writes in %.0fs", r.IdleSeconds), r.IdleWrites)
	fmt.Printf("%-34s %9.2fs, %d writes\n", "RESTART in sync: ready", r.Restart.ReadySeconds, r.Restart.Writes)
	for k, m := range r.Memory {
		fmt.Printf("%-34s steady %.1f MiB, peak %.1f MiB\n", "MEMORY "+k, m.SteadyMiB, m.PeakMiB)
	}
	if r.Scale.Replicas > 0 {
		fmt.Printf(
			"%-34s %9.2fs (%.1f s CPU), steady %.1f MiB, peak %.1f MiB\n",
			fmt.Sprintf("SCALE fan-out (%d replicas)", r.Scale.Replicas),
			r.Scale.FanOutSeconds,
			r.Scale.FanOutCPUSeconds,
			r.Scale.SteadyMiB,
			r.Scale.PeakMiB,
		)
		fmt.Printf("%-34s %9.2fs, %d writes\n", "SCALE RESTART: ready", r.Scale.Restart.ReadySeconds, r.Scale.Restart.Writes)
	}
}

func (b *bench) save() error { return saveResult(b.c.out, "", b.res) }

// saveResult writes res as JSON to dir/<prefix><time>.json.
func saveResult(dir, prefix string, res any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, prefix+time.Now().UTC().Format("20060102-150405")+".json")
	fmt.Println("results:", path)
	return writeJSON(path, res)
}

// writeJSON writes res as indented JSON to path.
func writeJSON(path string, res any) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func parallel(workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := first.Load().(error); ok {
		return err
	}
	return nil
}

// window is when a timed phase started and when its clock stopped, and the CPU
// seconds each process of the bench used in between, and with the phase's aftermath.
type window struct {
	start, end       time.Time
	cpu              map[string]float64
	cpuWithAftermath map[string]float64
	requests         map[string]int
	// serverAllocatedMiB is what the API server allocated over the span of requests.
	serverAllocatedMiB float64
}

func (w window) seconds() float64 { return w.end.Sub(w.start).Seconds() }

// windows are the create, update and delete phases of one round.
type windows struct{ create, update, delete window }

func (w windows) phases() Phases {
	return Phases{Create: w.create.seconds(), Update: w.update.seconds(), Delete: w.delete.seconds()}
}

// timed runs fn as a phase and returns its window. The window's CPU is read at the
// clock's stop, and again b.aftermath later, less what each process used in a quiet
// window of -aftermath just before the start, scaled to b.aftermath. The first alone
// may not be the same measure for LIMIT and cmsync: LIMIT's phase ends at its last
// answer, cmsync's when the bench has read from the audit log that its last write
// completed, so cmsync's window can take in work the API server does after answering
// (its watch cache decoding each write's event from etcd and sending it to its
// watchers) that LIMIT's leaves out. The default second covers that work for 1 KiB
// objects; for 900 KiB ones the API server decodes etcd's watch events for seconds
// after the last answer, and measureRound gives such phases a longer aftermath.
//
// With -server-gc-before-phase (the default) the API server first runs a full garbage
// collection. One collection of its heap costs it about as much CPU as a hundred
// writes, and each round starts a control plane of its own and runs the same sequence,
// so whether a collection fell in a short phase's window repeated from round to round
// rather than being a fair draw, and moved when the sequence changed: the
// 100-namespace cleanup came out 1.53x and 0.97x of LIMIT's in two runs of the same
// binary (sweep-20261127-172957-n100-limit-watched.json, -175329-n100-profiled.json),
// the difference being in how many rounds a hundred milliseconds of the API server's
// CPU appeared. After a collection, a phase's window holds one only when its own
// allocations bring the next, so each writer's phases pay for collections as they
// cause them.
func (b *bench) timed(fn func() error) window {
	aftermath := b.aftermath
	if b.c.serverGCBeforePhase {
		b.collectServerGarbage()
	}
	// The reads of the API server's /metrics are outside both CPU windows.
	requestsBefore, allocatedBefore := b.serverCounters()
	quietFrom := processCPU()
	time.Sleep(b.c.aftermath)
	before := processCPU()
	start := time.Now()
	must(fn())
	w := window{start: start, end: time.Now(), cpu: processCPU()}
	time.Sleep(aftermath)
	after := processCPU()
	var allocated float64
	w.requests, allocated = b.serverCounters()
	w.serverAllocatedMiB = (allocated - allocatedBefore) / (1 << 20)
	w.cpuWithAftermath = map[string]float64{}
	quietScale := aftermath.Seconds() / b.c.aftermath.Seconds()
	for name, seconds := range w.cpu {
		w.cpu[name] = seconds - before[name]
		quiet := (before[name] - quietFrom[name]) * quietScale
		w.cpuWithAftermath[name] = after[name] - before[name] - quiet
	}
	for name, n := range w.requests {
		if w.requests[name] = n - requestsBefore[name]; w.requests[name] == 0 {
			delete(w.requests, name)
		}
	}
	return w
}

// collectServerGarbage has the API server run a full garbage collection: net/http/pprof
// runs one before it writes a heap profile asked for with gc=1, and the API server
// serves it to its administrators (--profiling, on by default). runtime.GC returns
// when the collection has finished, sweeping included.
func (b *bench) collectServerGarbage() {
	_, err := b.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(context.Background())
	must(err)
}

// serverCounters reads, from one scrape of the API server's /metrics, its request
// counters (apiserver_request_total) summed by verb and resource, and the bytes it has
// allocated so far.
func (b *bench) serverCounters() (map[string]int, float64) {
	raw, err := b.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	must(err)
	counts := map[string]int{}
	var allocated float64
	for _, line := range strings.Split(string(raw), "\n") {
		if value, ok := sampleOf(line, "go_memstats_alloc_bytes_total"); ok {
			allocated = value
		}
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, _ := strings.Cut(line[len("apiserver_request_total{"):], "} ")
		var verb, resource, code string
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "verb":
				verb = strings.Trim(v, `"`)
			case "resource":
				resource = strings.Trim(v, `"`)
			case "code":
				code = strings.Trim(v, `"`)
			}
		}
		key := verb + " " + resource
		if !strings.HasPrefix(code, "2") {
			key += " " + code // a refusal (404, 409, 429, ...) is counted apart
		}
		n, _ := strconv.ParseFloat(value, 64)
		counts[key] += int(n)
	}
	return counts, allocated
}

// processCPU is the CPU time used so far by the bench and by each of its child
// processes (kube-apiserver, etcd, cmsync), by command name, and the time stolen.
func processCPU() map[string]float64 {
	cpu := map[string]float64{"bench": cpuSeconds(os.Getpid()), "(stolen)": stolenSeconds()}
	procs, _ := procfs.AllProcs()
	for _, proc := range procs {
		if stat, err := proc.Stat(); err == nil && stat.PPID == os.Getpid() {
			cpu[stat.Comm] += cpuSeconds(proc.PID)
		}
	}
	return cpu
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				model = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
				break
			}
		}
	}
	return fmt.Sprintf("%d cores, %s, %s", runtime.NumCPU(), model, runtime.Version())
}

func step(format string, args ...any) {
	fmt.Printf("[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func must1[T any](_ T, err error) { must(err) }
