// Command bench measures cmsync against the API server's own limit, on the project's
// local control plane (a real kube-apiserver and etcd): fan-out, update and cleanup
// times next to a plain 16-worker client doing the same writes, write requests while
// idle and on restart (from the API server's audit log, by user agent), time to ready,
// and the controller's memory with and without unrelated ConfigMaps, and at scale.
// `make bench` runs it; it prints a table and writes bench/results/<time>.json.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cmsync/cmsync/test/controlplane"
)

type config struct {
	namespaces, unrelated, sources, workers, rounds int
	idle                                            time.Duration
	binary, out, profile, cmsyncArgs                string
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
}

// Phases are the seconds of the create, update and delete phases.
type Phases struct {
	Create float64 `json:"createSeconds"`
	Update float64 `json:"updateSeconds"`
	Delete float64 `json:"deleteSeconds"`
}

type Restart struct {
	ReadySeconds float64 `json:"readySeconds"`
	Writes       int64   `json:"writes"`
}

type Memory struct {
	SteadyMiB float64 `json:"steadyMiB"`
	PeakMiB   float64 `json:"peakMiB"`
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

func main() {
	var c config
	flag.IntVar(&c.namespaces, "n", 1000, "target namespaces")
	flag.IntVar(&c.unrelated, "u", 20000, "unrelated 1 KiB ConfigMaps")
	flag.IntVar(&c.sources, "s", 100, "sources of the SCALE phase, each to all namespaces (0 skips it)")
	flag.IntVar(&c.workers, "workers", 16, "workers of the plain client")
	flag.IntVar(&c.rounds, "rounds", 5, "rounds of LIMIT and of cmsync's FAN-OUT, UPDATE and CLEANUP; the figures are medians")
	flag.DurationVar(&c.idle, "idle", 60*time.Second, "length of the IDLE phase")
	flag.StringVar(&c.binary, "cmsync", "bin/cmsync", "the cmsync binary")
	flag.StringVar(&c.cmsyncArgs, "cmsync-args", "", "extra flags for cmsync, space-separated (the defaults are measured without)")
	flag.StringVar(&c.out, "out", "bench/results", "directory of the JSON results")
	flag.StringVar(&c.profile, "profile", "", "directory for heap profiles of cmsync at each memory reading (go tool pprof)")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	work, err := os.MkdirTemp("", "cmsync-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	audit := filepath.Join(work, "audit.log")
	env, err := controlplane.StartWith(controlplane.Options{CRDDirs: []string{"deploy/crds"}, AuditLog: audit})
	if err != nil {
		return err
	}
	defer env.Stop() //nolint:errcheck
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		return err
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // the plain client: no client-side throttle
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	b := &bench{c: c, cs: cs, kubeconfig: kubeconfig, audit: audit, work: work,
		res: Result{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Namespaces: c.namespaces, Unrelated: c.unrelated,
			Sources: c.sources, Memory: map[string]Memory{}, Ratios: map[string]float64{}}}
	return b.run()
}

type bench struct {
	c                       config
	cs                      *kubernetes.Clientset
	kubeconfig, audit, work string
	res                     Result
	targets                 []string
}

func (b *bench) run() error {
	ctx := context.Background()
	step("creating %d namespaces", b.c.namespaces)
	for i := range b.c.namespaces {
		b.targets = append(b.targets, fmt.Sprintf("bench-%04d", i))
	}
	must(parallel(b.c.workers, len(b.targets), func(i int) error {
		_, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.targets[i]}}, metav1.CreateOptions{})
		return err
	}))
	must1(b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench-src"}}, metav1.CreateOptions{}))

	// MEMORY with U=0: the same fan-out, update and idle as with U unrelated
	// ConfigMaps below, so the two readings differ only by U.
	step("MEMORY with U=0")
	proc := b.startCmsync()
	b.fanOut(ctx, "mem0", 1)
	b.update(ctx, "mem0")
	time.Sleep(5*time.Second + b.c.idle)
	b.res.Memory["u0"] = proc.memory()
	b.heapProfile(proc, "u0")
	b.cleanup(ctx, "mem0", 1)
	proc.stop()

	step("creating %d unrelated ConfigMaps", b.c.unrelated)
	payload := strings.Repeat("x", 1024)
	must(parallel(b.c.workers, b.c.unrelated, func(i int) error {
		_, err := b.cs.CoreV1().ConfigMaps(b.targets[i%len(b.targets)]).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%05d", i)}, Data: map[string]string{"v": payload}}, metav1.CreateOptions{})
		return err
	}))

	// LIMIT and cmsync take turns, round after round, so that both meet the same
	// API server moods; a single round's ratio moves by tens of percent here.
	proc = b.startCmsync()
	for r := range b.c.rounds {
		step("round %d of %d: LIMIT (a plain client, %d workers, no client-side throttle), then cmsync's FAN-OUT, UPDATE, CLEANUP", r+1, b.c.rounds, b.c.workers)
		b.res.LimitRounds = append(b.res.LimitRounds, b.limit(ctx, payload))
		name := fmt.Sprintf("app-r%02d", r)
		var round Phases
		round.Create = b.fanOut(ctx, name, 1)
		round.Update = b.update(ctx, name)
		if r < b.c.rounds-1 {
			round.Delete = b.cleanup(ctx, name, 1)
		} else {
			// The last round's source stays for IDLE and RESTART.
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

			step("CLEANUP")
			round.Delete = b.cleanup(ctx, name, 1)
		}
		b.res.CmsyncRounds = append(b.res.CmsyncRounds, round)
	}
	proc.stop()
	b.res.Rounds = b.c.rounds
	b.res.Limit, b.res.Cmsync = medians(b.res.LimitRounds), medians(b.res.CmsyncRounds)

	if b.c.sources > 0 {
		step("SCALE: %d sources to %d namespaces", b.c.sources, b.c.namespaces)
		proc = b.startCmsync()
		b.res.Scale.Replicas = b.c.sources * b.c.namespaces
		cpu := proc.cpuSeconds()
		b.res.Scale.FanOutSeconds = b.fanOut(ctx, "scale", b.c.sources)
		b.res.Scale.FanOutCPUSeconds = proc.cpuSeconds() - cpu
		time.Sleep(10 * time.Second)
		m := proc.memory()
		b.heapProfile(proc, "scale")
		b.res.Scale.PeakMiB, b.res.Scale.SteadyMiB = m.PeakMiB, m.SteadyMiB
		proc.stop()
		proc, b.res.Scale.Restart = b.restart()
		proc.stop()
	}
	b.res.Ratios["fanOut/limitCreate"] = b.res.Cmsync.Create / b.res.Limit.Create
	b.res.Ratios["update/limitUpdate"] = b.res.Cmsync.Update / b.res.Limit.Update
	b.res.Ratios["cleanup/limitDelete"] = b.res.Cmsync.Delete / b.res.Limit.Delete
	b.print()
	return b.save()
}

// medians are the per-phase medians of rounds.
func medians(rounds []Phases) Phases {
	median := func(get func(Phases) float64) float64 {
		v := make([]float64, len(rounds))
		for i, r := range rounds {
			v[i] = get(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return Phases{
		Create: median(func(p Phases) float64 { return p.Create }),
		Update: median(func(p Phases) float64 { return p.Update }),
		Delete: median(func(p Phases) float64 { return p.Delete }),
	}
}

// limit times a plain client creating, updating and deleting one 1 KiB ConfigMap in
// each namespace.
func (b *bench) limit(ctx context.Context, payload string) Phases {
	var p Phases
	cms := func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "limit", Namespace: b.targets[i]}, Data: map[string]string{"v": payload}}
	}
	p.Create = timed(func() error {
		return parallel(b.c.workers, len(b.targets), func(i int) error {
			_, err := b.cs.CoreV1().ConfigMaps(b.targets[i]).Create(ctx, cms(i), metav1.CreateOptions{})
			return err
		})
	})
	p.Update = timed(func() error {
		return parallel(b.c.workers, len(b.targets), func(i int) error {
			cm := cms(i)
			cm.Data["v"] = "updated-" + payload[:1000]
			_, err := b.cs.CoreV1().ConfigMaps(b.targets[i]).Update(ctx, cm, metav1.UpdateOptions{})
			return err
		})
	})
	p.Delete = timed(func() error {
		return parallel(b.c.workers, len(b.targets), func(i int) error {
			return b.cs.CoreV1().ConfigMaps(b.targets[i]).Delete(ctx, "limit", metav1.DeleteOptions{})
		})
	})
	return p
}

// replicaWatch counts, from a watch, the replicas whose "v" equals want.
type replicaWatch struct {
	mu      sync.Mutex
	matches map[types.NamespacedName]bool
	want    string
	stop    chan struct{}
}

func (b *bench) watchReplicas(want string) *replicaWatch {
	w := &replicaWatch{matches: map[types.NamespacedName]bool{}, want: want, stop: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(b.cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = "app.kubernetes.io/managed-by=cmsync"
	}))
	inf := factory.Core().V1().ConfigMaps().Informer()
	set := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			w.mu.Lock()
			w.matches[types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}] = cm.Data["v"] == w.want
			w.mu.Unlock()
		}
	}
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: set, UpdateFunc: func(_, o any) { set(o) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				w.mu.Lock()
				delete(w.matches, types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name})
				w.mu.Unlock()
			}
		},
	})
	factory.Start(w.stop)
	factory.WaitForCacheSync(w.stop)
	return w
}

// count returns how many watched replicas named prefix* match, and how many exist.
func (w *replicaWatch) count(prefix string) (matching, total int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, ok := range w.matches {
		if strings.HasPrefix(k.Name, prefix) {
			total++
			if ok {
				matching++
			}
		}
	}
	return matching, total
}

func (w *replicaWatch) waitFor(prefix string, cond func(matching, total int) bool) {
	for {
		if cond(w.count(prefix)) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (b *bench) source(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "bench-src", Name: name,
		Labels:      map[string]string{"cmsync.io/replicate": "true"},
		Annotations: map[string]string{"cmsync.io/target-namespaces": "bench-[0-9]*"}},
		Data: map[string]string{"v": "1", "payload": strings.Repeat("y", 1000)}}
}

// fanOut creates count sources named prefix-i and times until every replica exists with
// the right content.
func (b *bench) fanOut(ctx context.Context, prefix string, count int) float64 {
	w := b.watchReplicas("1")
	defer close(w.stop)
	want := count * len(b.targets)
	return timed(func() error {
		err := parallel(b.c.workers, count, func(i int) error {
			_, err := b.cs.CoreV1().ConfigMaps("bench-src").Create(ctx, b.source(fmt.Sprintf("%s-%03d", prefix, i)), metav1.CreateOptions{})
			return err
		})
		w.waitFor(prefix, func(m, _ int) bool { return m == want })
		return err
	})
}

func (b *bench) update(ctx context.Context, prefix string) float64 {
	w := b.watchReplicas("2")
	defer close(w.stop)
	return timed(func() error {
		src := b.source(prefix + "-000")
		src.Data["v"] = "2"
		_, err := b.cs.CoreV1().ConfigMaps("bench-src").Update(ctx, src, metav1.UpdateOptions{})
		w.waitFor(prefix, func(m, _ int) bool { return m == len(b.targets) })
		return err
	})
}

func (b *bench) cleanup(ctx context.Context, prefix string, count int) float64 {
	w := b.watchReplicas("")
	defer close(w.stop)
	return timed(func() error {
		err := parallel(b.c.workers, count, func(i int) error {
			return b.cs.CoreV1().ConfigMaps("bench-src").Delete(ctx, fmt.Sprintf("%s-%03d", prefix, i), metav1.DeleteOptions{})
		})
		w.waitFor(prefix, func(_, total int) bool { return total == 0 })
		return err
	})
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
	f, err := os.Open(b.audit)
	must(err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	var n int64
	for sc.Scan() {
		var e struct {
			UserAgent string    `json:"userAgent"`
			Verb      string    `json:"verb"`
			Stage     string    `json:"stage"`
			Received  time.Time `json:"requestReceivedTimestamp"`
			ObjectRef struct {
				Resource string `json:"resource"`
			} `json:"objectRef"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Stage != "ResponseComplete" || !strings.HasPrefix(e.UserAgent, "cmsync") {
			continue
		}
		// Lease renewals of leader election are not cmsync's work; it runs without it here.
		if e.Received.After(from) && e.Received.Before(to) && e.ObjectRef.Resource != "leases" {
			n++
		}
	}
	return n
}

type process struct {
	metrics string
	cmd     *exec.Cmd
	peakRSS atomic.Int64
	done    chan struct{}
}

// startCmsync runs the binary with its default flags and waits for /readyz.
func (b *bench) startCmsync() *process {
	metrics, health := freePort(), freePort()
	args := []string{"--kubeconfig=" + b.kubeconfig, "--metrics-bind-address=" + metrics, "--health-probe-bind-address=" + health}
	if b.c.profile != "" {
		args = append(args, "--profiling")
	}
	args = append(args, strings.Fields(b.c.cmsyncArgs)...)
	cmd := exec.Command(b.c.binary, args...)
	logFile, err := os.Create(filepath.Join(b.work, fmt.Sprintf("cmsync-%d.log", time.Now().UnixNano())))
	must(err)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	must(cmd.Start())
	p := &process{cmd: cmd, done: make(chan struct{}), metrics: metrics}
	go p.sampleRSS()
	for {
		resp, err := http.Get("http://" + health + "/readyz")
		if err == nil {
			resp.Body.Close()
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
			if hwm := statusKiB(p.cmd.Process.Pid, "VmHWM:"); hwm > p.peakRSS.Load() {
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
	defer resp.Body.Close()
	must(os.MkdirAll(b.c.profile, 0o755))
	f, err := os.Create(filepath.Join(b.c.profile, name+".pprof"))
	must(err)
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	must(err)
}

func (p *process) memory() Memory {
	return Memory{SteadyMiB: float64(statusKiB(p.cmd.Process.Pid, "VmRSS:")) / 1024, PeakMiB: float64(max(p.peakRSS.Load(), statusKiB(p.cmd.Process.Pid, "VmHWM:"))) / 1024}
}

func (p *process) stop() {
	close(p.done)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_, _ = p.cmd.Process.Wait()
}

// cpuSeconds is the user and system CPU time the process has used (/proc/<pid>/stat,
// in clock ticks of 1/100 s on Linux).
func (p *process) cpuSeconds() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100
}

func statusKiB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field) {
			v, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return v
		}
	}
	return 0
}

func (b *bench) print() {
	r := b.res
	fmt.Printf("\ncmsync benchmark — %s, N=%d namespaces, U=%d unrelated ConfigMaps\n", r.Machine, r.Namespaces, r.Unrelated)
	fmt.Printf("%-34s %10s %10s %8s   (medians of %d rounds)\n", "phase", "cmsync", "LIMIT", "ratio", r.Rounds)
	fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "FAN-OUT (create N replicas)", r.Cmsync.Create, r.Limit.Create, r.Ratios["fanOut/limitCreate"])
	fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "UPDATE (N replicas follow)", r.Cmsync.Update, r.Limit.Update, r.Ratios["update/limitUpdate"])
	fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "CLEANUP (N replicas deleted)", r.Cmsync.Delete, r.Limit.Delete, r.Ratios["cleanup/limitDelete"])
	fmt.Printf("%-34s %10d\n", fmt.Sprintf("IDLE writes in %.0fs", r.IdleSeconds), r.IdleWrites)
	fmt.Printf("%-34s %9.2fs, %d writes\n", "RESTART in sync: ready", r.Restart.ReadySeconds, r.Restart.Writes)
	for k, m := range r.Memory {
		fmt.Printf("%-34s steady %.1f MiB, peak %.1f MiB\n", "MEMORY "+k, m.SteadyMiB, m.PeakMiB)
	}
	if r.Scale.Replicas > 0 {
		fmt.Printf("%-34s %9.2fs (%.1f s CPU), steady %.1f MiB, peak %.1f MiB\n", fmt.Sprintf("SCALE fan-out (%d replicas)", r.Scale.Replicas), r.Scale.FanOutSeconds, r.Scale.FanOutCPUSeconds, r.Scale.SteadyMiB, r.Scale.PeakMiB)
		fmt.Printf("%-34s %9.2fs, %d writes\n", "SCALE RESTART: ready", r.Scale.Restart.ReadySeconds, r.Scale.Restart.Writes)
	}
}

func (b *bench) save() error {
	if err := os.MkdirAll(b.c.out, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(b.res, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(b.c.out, time.Now().UTC().Format("20060102-150405")+".json")
	fmt.Println("results:", path)
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

func timed(fn func() error) float64 {
	start := time.Now()
	must(fn())
	return time.Since(start).Seconds()
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	defer l.Close()
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
