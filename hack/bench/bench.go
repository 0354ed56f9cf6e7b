package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cmsync/cmsync/hack/bench/measure"
	"github.com/cmsync/cmsync/hack/bench/report"
	"github.com/cmsync/cmsync/hack/bench/workload"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
)

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
	return &bench{
		c: c, env: env, cs: cs, kubeconfig: kubeconfig, audit: o.AuditLog, work: work,
		kind: workload.ConfigMaps{Clientset: cs},
		cmsync: workload.Cmsync{
			Binary: c.binary, Kubeconfig: kubeconfig, LogDir: work,
			Args: strings.Fields(c.cmsyncArgs), Env: strings.Fields(c.cmsyncEnv),
		},
		aftermath: c.aftermath,
		payload:   strings.Repeat("x", 1024),
	}, stop, nil
}

type bench struct {
	c                       config
	env                     *controlplane.Env
	cs                      *kubernetes.Clientset
	kubeconfig, audit, work string
	res                     report.Result
	targets                 []string
	// cmsync is how the bench runs cmsync.
	cmsync workload.Cmsync
	// kind is what the phases write: ConfigMaps, then Secrets.
	kind workload.Kind
	// payload is the value of each source and of each of LIMIT's objects.
	payload string
	// aftermath is how long after each timed phase its CPU with aftermath is read:
	// -aftermath, or longer at a point of big phases (measureRound).
	aftermath time.Duration
}

// startCmsync runs the binary with its default flags and waits for /readyz.
func (b *bench) startCmsync(extraArgs ...string) *workload.Process {
	return b.startCmsyncWith("", extraArgs...)
}

// startCmsyncWith is startCmsync with env (space-separated NAME=value) added to
// cmsync's environment.
func (b *bench) startCmsyncWith(env string, extraArgs ...string) *workload.Process {
	if b.c.profile != "" {
		extraArgs = append(extraArgs, "--profiling")
	}
	p, err := b.cmsync.Start(strings.Fields(env), extraArgs...)
	must(err)
	return p
}

// restart starts cmsync, with extraArgs, with everything in sync and reports time to
// ready and the writes it made in the 20 s after.
func (b *bench) restart(extraArgs ...string) (*workload.Process, report.Restart) {
	start := time.Now()
	proc := b.startCmsync(extraArgs...)
	ready := time.Since(start).Seconds()
	time.Sleep(20 * time.Second)
	return proc, report.Restart{ReadySeconds: ready, Writes: b.cmsyncWrites(start, time.Now())}
}

// cmsyncWrites counts the write requests the API server audited from cmsync between
// from and to, and names them when there are any: none is the target.
func (b *bench) cmsyncWrites(from, to time.Time) int64 {
	var n int64
	what := map[string]int{}
	b.auditedWrites(func(e measure.AuditEvent) {
		// Lease renewals of leader election are not cmsync's work; it runs without it here.
		// The access reviews a start with --object-kinds makes (does cmsync hold each
		// enabled kind's verbs?) are questions: the API server stores nothing.
		if strings.HasPrefix(e.UserAgent, "cmsync") && e.Received.After(from) && e.Received.Before(to) &&
			e.ObjectRef.Resource != "leases" && e.ObjectRef.Resource != "selfsubjectaccessreviews" {
			n++
			what[fmt.Sprintf("%s %s %s/%s (%d)", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name, e.ResponseStatus.Code)]++
		}
	})
	if n > 0 {
		step("cmsync wrote %d times between %s and %s: %v", n, from.Format("15:04:05.000"), to.Format("15:04:05.000"), what)
	}
	return n
}

// auditedWrites calls fn with every completed write request in the audit log.
func (b *bench) auditedWrites(fn func(e measure.AuditEvent)) { must(measure.EachWrite(b.audit, fn)) }

// openAudit opens the audit log, from its start or its end, for lines holding every match.
func (b *bench) openAudit(fromEnd bool, match ...[]byte) *measure.AuditTail {
	tail, err := measure.OpenAudit(b.audit, fromEnd, match...)
	must(err)
	return tail
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
// counters summed by verb and resource, and the bytes it has allocated so far.
func (b *bench) serverCounters() (map[string]int, float64) {
	raw, err := b.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	must(err)
	return measure.RequestCounters(raw)
}

// heapProfile saves cmsync's heap profile, when profiling was asked for.
func (b *bench) heapProfile(p *workload.Process, name string) {
	if b.c.profile == "" {
		return
	}
	resp, err := http.Get("http://" + p.MetricsAddr + "/debug/pprof/heap")
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
func (b *bench) cpuProfiles(ctx context.Context, p *workload.Process, name string, seconds int) (wait func()) {
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
			if resp, err = http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.MetricsAddr, seconds)); err == nil {
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
