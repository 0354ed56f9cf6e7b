package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cmsync/cmsync/hack/bench/measure"
	"github.com/cmsync/cmsync/hack/bench/report"
	"github.com/cmsync/cmsync/hack/bench/workload"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
)

// Modes of scopedModes' points.
const (
	modeClusterWide = "cluster-wide"
	modeScoped      = "scoped"
)

// scopedModes measures scoped mode (--namespaces listing every namespace the bench
// creates) against the default at each count of -scoped-n, each point on a control
// plane of its own: what a watch per namespace costs.
func scopedModes(c config) error {
	counts, err := intList(c.scopedN)
	if err != nil {
		return fmt.Errorf("-scoped-n: %w", err)
	}
	res := report.ScopedResult{Date: time.Now().UTC().Format(time.RFC3339), Machine: report.Machine(), Rounds: c.rounds}
	for _, n := range counts {
		for _, mode := range []string{modeClusterWide, modeScoped} {
			step("SCOPED point: %d namespaces, %s", n, mode)
			p, err := measureScoped(c, n, mode)
			if err != nil {
				return err
			}
			report.PrintScopedPoint(p)
			res.Points = append(res.Points, p)
		}
	}
	return report.Save(c.out, "scoped-", res)
}

// measureScoped starts cmsync over n namespaces in mode, and measures its watches, its
// start, the fan-out of one source against LIMIT's creates (rounds in turn) and its
// memory after them.
func measureScoped(c config, n int, mode string) (report.ScopedPoint, error) {
	b, stop, err := startBench(c, controlplane.Options{})
	if err != nil {
		return report.ScopedPoint{}, err
	}
	defer stop()
	ctx := context.Background()
	b.createNamespaces(ctx, n)
	var args []string
	if mode == modeScoped {
		args = append(args, "--namespaces="+strings.Join(append(slices.Clone(b.targets), workload.SourceNamespace), ","))
	}
	others := b.watchesOf("configmaps") // the control plane's own
	start := time.Now()
	proc := b.startCmsync(args...)
	defer proc.Stop()
	p := report.ScopedPoint{Mode: mode, Namespaces: n, ReadySeconds: time.Since(start).Seconds()}
	noProfile := func(string) func() { return func() {} }
	var fanOut, limitCreate []float64
	for r := range c.rounds {
		limitCreate = append(limitCreate, b.limit(ctx, 1, noProfile).create.seconds())
		name := fmt.Sprintf("scoped-r%02d", r)
		fanOut = append(fanOut, b.fanOut(ctx, name, 1).seconds())
		b.cleanup(ctx, name, 1)
	}
	time.Sleep(5 * time.Second) // the passes the cleanup queued
	p.Memory, p.ConfigMapWatches = proc.Memory(), b.watchesOf("configmaps")-others
	identity := func(v float64) float64 { return v }
	p.FanOutSeconds, p.LimitCreateSeconds = report.MedianOf(fanOut, identity), report.MedianOf(limitCreate, identity)
	p.FanOutRounds, p.LimitCreateRounds = fanOut, limitCreate
	return p, nil
}

// watchesOf is how many watches of resource the API server holds open.
func (b *bench) watchesOf(resource string) int {
	raw, err := b.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	must(err)
	return measure.WatchesOf(raw, resource)
}
