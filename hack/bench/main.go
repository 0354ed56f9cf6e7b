// Command bench measures cmsync against the API server's own limit, on the project's
// local control plane (a real kube-apiserver and etcd): fan-out, update and cleanup
// times next to a plain 16-worker client doing the same writes, write requests while
// idle and on restart (from the API server's audit log, by user agent), time to ready,
// and the controller's memory with and without unrelated ConfigMaps, and at scale.
// `make bench` runs it; it prints a table and writes bench/results/<time>.json.
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cmsync/cmsync/hack/bench/report"
	"github.com/cmsync/cmsync/hack/bench/workload"
)

type config struct {
	namespaces, unrelated, sources, workers, rounds, secretRounds int
	objectRounds                                                  int
	objectLimitWatched                                            bool
	idle, aftermath                                               time.Duration
	binary, out, profile, cmsyncArgs, cmsyncEnv                   string
	sweepCmsyncFirst                                              bool
	sweepLimitWatched, sweepWarmUp                                bool
	serverGCBeforePhase                                           bool
	sweepN, sweepS, sweepSizes                                    string
	sweepBaseN, sweepRounds, sweepShortRounds, sweepRestarts      int
	restartVariants                                               string
	plot, plotDir, stylesSize, stylesOp                           string
	scopedN                                                       string
}

// writeVerbs are the audit log's verbs of a replica write, and rewriteVerbs those of
// a write to a replica that exists.
var (
	writeVerbs   = []string{"create", verbUpdate, "patch"}
	rewriteVerbs = writeVerbs[1:]
)

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
	"point": {"one point in detail: memory, LIMIT's and cmsync's rounds, idle, restart, Secrets, ObjectSync and SCALE; writes bench/results/<time>.json",
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
	"scoped": {"scoped mode against the default at each count of -scoped-n listed namespaces: cmsync's watches of ConfigMaps held at the " +
		"API server, time to ready, memory, and the fan-out of one source to every namespace against LIMIT's creates (medians of -rounds); " +
		"writes bench/results/scoped-<time>.json",
		[]func(*flag.FlagSet, *config){bindPointFlags, bindScopedFlags}, scopedModes},
	"plot": {"only draw the plots of the sweep JSON files given as arguments (a later file's point replaces an earlier one's)",
		[]func(*flag.FlagSet, *config){bindPlotDir}, func(c config) error { return report.DrawSweep(c.plot, c.plotDir) }},
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
	fs.IntVar(&c.objectRounds, "object-rounds", 9,
		"the same rounds with an ObjectSync copying a NetworkPolicy, cmsync run with --object-kinds="+workload.PolicyKind+
			", then its idle writes, restart and memory (0 skips them)")
	fs.BoolVar(&c.objectLimitWatched, "object-limit-watched", false,
		"each ObjectSync round also runs LIMIT's NetworkPolicy writes with a metadata-only watch of them open, as cmsync's replica store "+
			"watches its replicas (LIMIT watched): what telling a watcher of each write costs the API server, which LIMIT alone does not pay")
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
		"each round also runs LIMIT's writes with a metadata-only watch of them open, as cmsync's replica store watches its replicas "+
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

// bindScopedFlags defines the flags of scoped mode's measurement (scoped).
func bindScopedFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.scopedN, "scoped-n", "10,100,1000", "the counts of namespaces listed in --namespaces (each also measured without)")
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
