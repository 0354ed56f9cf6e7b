package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cmsync/cmsync/hack/bench/measure"
	"github.com/cmsync/cmsync/hack/bench/report"
	"github.com/cmsync/cmsync/hack/bench/workload"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
)

// restartsOnly measures a sweep point's memory and restarts without the rounds around
// them: for each count of -sweep-s, on a control plane of its own, cmsync fans out that
// many sources to -sweep-base-n namespaces and is restarted as the sweep restarts it.
// The point's memory and restarts follow the same fan-out in the sweep, so the figures
// compare; a change to the start can be tried in minutes.
func restartsOnly(c config) error {
	counts, err := intList(c.sweepS)
	if err != nil {
		return fmt.Errorf("-sweep-s: %w", err)
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	res := report.RestartsResult{Date: time.Now().UTC().Format(time.RFC3339), Machine: report.Machine(), CmsyncArgs: c.cmsyncArgs}
	path := filepath.Join(c.out, "restarts-"+time.Now().UTC().Format("20060102-150405")+".json")
	for _, sources := range counts {
		p := report.RestartPoint{Namespaces: c.sweepBaseN, Sources: sources, Replicas: c.sweepBaseN * sources}
		b, stop, err := startBench(c, controlplane.Options{})
		if err != nil {
			return err
		}
		step("RESTARTS ONLY: %d sources to %d namespaces", sources, p.Namespaces)
		b.createNamespaces(context.Background(), p.Namespaces)
		proc := b.startCmsync() // the bench's payload is 1 KiB
		p.FanOut = b.fanOut(context.Background(), "p", sources).seconds()
		time.Sleep(min(c.idle, 30*time.Second)) // as the sweep lets the heap settle
		p.Memory = proc.Memory()
		proc, p.Restart = b.restartsVerified(proc, p.Replicas)
		proc.Stop()
		if c.profile != "" {
			// With the profiles, the logs of each start: when its caches had listed,
			// when its workers started.
			logs, _ := filepath.Glob(filepath.Join(b.work, "cmsync-*.log"))
			for _, log := range logs {
				data, err := os.ReadFile(log)
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(c.profile, fmt.Sprintf("restarts-s%d-%s", sources, filepath.Base(log))), data, 0o644); err != nil {
					return err
				}
			}
		}
		stop()
		fmt.Printf("%d replicas: fan-out %.2fs, resident %.1f MiB, restart: ready %.2fs, verified %.2fs (of %v), CPU %.2fs (of %v), "+
			"resident after %.1f MiB (of %v), %d writes\n",
			p.Replicas, p.FanOut, p.Memory.SteadyMiB, p.Restart.ReadySeconds, p.Restart.VerifiedSeconds, p.Restart.VerifiedRounds,
			p.Restart.CPUSeconds, p.Restart.CPURounds, p.Restart.ResidentMiB, p.Restart.ResidentRounds, p.Restart.Writes)
		res.Points = append(res.Points, p)
		if err := report.WriteJSON(path, res); err != nil {
			return err
		}
	}
	fmt.Println("results:", path)
	return nil
}

// restartsVerified stops proc and restarts cmsync as many times as -sweep-restarts
// with each environment of -sweep-restart-variants (recorded apart), then with none,
// and reports the medians of those (writes summed: any is a fault). The default
// restarts come last, so the process the point goes on with runs as the others did.
func (b *bench) restartsVerified(proc *workload.Process, replicas int) (*workload.Process, report.Restart) {
	var res report.Restart
	for env := range strings.SplitSeq(b.c.restartVariants, ";") {
		if env = strings.TrimSpace(env); env == "" {
			continue
		}
		var variant []report.Restart
		proc, variant = b.restarts(proc, replicas, env)
		if res.Variants == nil {
			res.Variants, res.VariantsCPUSeconds, res.VariantsResidentMiB = map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
		}
		for _, r := range variant {
			res.Variants[env] = append(res.Variants[env], r.VerifiedSeconds)
			res.VariantsCPUSeconds[env] = append(res.VariantsCPUSeconds[env], r.CPUSeconds)
			res.VariantsResidentMiB[env] = append(res.VariantsResidentMiB[env], r.ResidentMiB)
		}
		fmt.Printf("  restart with %s: verified %v, CPU %v s, resident %v MiB\n",
			env, res.Variants[env], res.VariantsCPUSeconds[env], res.VariantsResidentMiB[env])
	}
	proc, rounds := b.restarts(proc, replicas, "")
	res.ReadySeconds = report.MedianOf(rounds, func(r report.Restart) float64 { return r.ReadySeconds })
	res.VerifiedSeconds = report.MedianOf(rounds, func(r report.Restart) float64 { return r.VerifiedSeconds })
	res.ResidentMiB = report.MedianOf(rounds, func(r report.Restart) float64 { return r.ResidentMiB })
	res.CPUSeconds = report.MedianOf(rounds, func(r report.Restart) float64 { return r.CPUSeconds })
	for _, r := range rounds {
		res.VerifiedRounds = append(res.VerifiedRounds, r.VerifiedSeconds)
		res.CPURounds = append(res.CPURounds, r.CPUSeconds)
		res.ResidentRounds = append(res.ResidentRounds, r.ResidentMiB)
		res.Writes += r.Writes
	}
	return proc, res
}

// restarts stops proc and restarts cmsync -sweep-restarts times, with env added to its
// environment.
func (b *bench) restarts(proc *workload.Process, replicas int, env string) (*workload.Process, []report.Restart) {
	n := max(1, b.c.sweepRestarts)
	rounds := make([]report.Restart, n)
	for i := range rounds {
		step("RESTART %d of %d with %d replicas in sync %s", i+1, n, replicas, env)
		proc.Stop()
		proc, rounds[i] = b.restartVerified(replicas, env)
	}
	return proc, rounds
}

// restartVerified starts cmsync, with env added to its environment, with every replica
// in place and reports when it was ready, when it had verified every replica (its
// cmsync_replicas{state="synced"} gauges, set after a source's pass compared each of
// its replicas with the source, add up to replicas; read every 100 ms, as reading
// cmsync's metrics costs it CPU), and the writes it made until 20 s after the start (or
// -idle, if shorter).
func (b *bench) restartVerified(replicas int, env string) (*workload.Process, report.Restart) {
	start := time.Now()
	proc := b.startCmsyncWith(env)
	res := report.Restart{ReadySeconds: time.Since(start).Seconds()}
	profiled := b.cpuProfiles(context.Background(), proc, fmt.Sprintf("restart-%d", replicas), restartProfileSeconds)
	defer profiled()
	for deadline := start.Add(10 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if syncedReplicas(proc) == replicas {
			res.VerifiedSeconds = time.Since(start).Seconds()
			res.CPUSeconds = proc.CPUSeconds()
			break
		}
		if time.Now().After(deadline) {
			must(fmt.Errorf("after a restart cmsync verified %d of %d replicas in 10 minutes", syncedReplicas(proc), replicas))
		}
	}
	time.Sleep(time.Until(start.Add(min(b.c.idle, 20*time.Second))))
	res.Writes = b.cmsyncWrites(start, time.Now())
	res.ResidentMiB = proc.Memory().SteadyMiB
	return proc, res
}

// restartProfileSeconds is the length of a restart's CPU profiles: the whole of a
// restart at 100,000 replicas, which takes about 5 s on 2 cores.
const restartProfileSeconds = 8

// apiMetric reads the value of one series of the API server's metrics (the full
// line up to the value: name and labels); 0 when absent.
func (b *bench) apiMetric(series string) int {
	raw, err := b.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	must(err)
	for _, line := range strings.Split(string(raw), "\n") {
		if value, ok := measure.SampleOf(line, series); ok {
			return int(value)
		}
	}
	return 0
}

// syncedReplicas reads the sum of cmsync's cmsync_replicas{state="synced"} gauges. It
// asks for the metrics uncompressed: Go's client asks for gzip by default, and
// compressing the answer to a read every 100 ms took 3% of cmsync's CPU in a profiled
// restart at 100,000 replicas: a cost of the bench's reading (a Prometheus reads every
// 15-30 s), not of cmsync's start.
func syncedReplicas(p *workload.Process) int {
	req, err := http.NewRequest(http.MethodGet, "http://"+p.MetricsAddr+"/metrics", nil)
	must(err)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer func() { _ = resp.Body.Close() }()
	total := 0
	scanner := bufio.NewScanner(resp.Body)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.HasPrefix(line, "cmsync_replicas{") && strings.Contains(line, `state="synced"`) {
			_, value, _ := strings.Cut(line, "} ")
			n, _ := strconv.ParseFloat(value, 64)
			total += int(n)
		}
	}
	return total
}
