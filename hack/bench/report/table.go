package report

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// cpuList words each process's CPU seconds, by name.
func cpuList(cpu map[string]float64) string {
	parts := make([]string, 0, len(cpu))
	for _, name := range slices.Sorted(maps.Keys(cpu)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", name, cpu[name]))
	}
	return strings.Join(parts, ", ")
}

// FloatList words figures with two decimals.
func FloatList(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strings.Join(parts, " ")
}

// PrintPoint prints a sweep point's figures.
func PrintPoint(p Point) {
	fmt.Printf("\nN=%d S=%d size=%d (%d replicas): cmsync / LIMIT (ratio), medians\n", p.Namespaces, p.Sources, p.SizeBytes, p.Replicas)
	fmt.Printf("  fan-out      %8.2fs %8.2fs (%.2fx)\n", p.Cmsync.Create, p.Limit.Create, p.Ratios.Create)
	fmt.Printf("  mass update  %8.2fs %8.2fs (%.2fx)\n", p.Cmsync.Update, p.Limit.Update, p.Ratios.Update)
	fmt.Printf("  cleanup      %8.2fs %8.2fs (%.2fx)\n", p.Cmsync.Delete, p.Limit.Delete, p.Ratios.Delete)
	fmt.Printf("  API server + etcd CPU s per 1,000 writes: create %.2f/%.2f update %.2f/%.2f delete %.2f/%.2f\n",
		p.CmsyncServerCPUPer1000.Create, p.LimitServerCPUPer1000.Create, p.CmsyncServerCPUPer1000.Update,
		p.LimitServerCPUPer1000.Update, p.CmsyncServerCPUPer1000.Delete, p.LimitServerCPUPer1000.Delete)
	a, l := p.CmsyncServerCPUPer1000WithAftermath, p.LimitServerCPUPer1000WithAftermath
	fmt.Printf("    with each phase's aftermath: create %.2f/%.2f (%.2fx) update %.2f/%.2f (%.2fx) delete %.2f/%.2f (%.2fx)\n",
		a.Create, l.Create, a.Create/l.Create, a.Update, l.Update, a.Update/l.Update, a.Delete, l.Delete, a.Delete/l.Delete)
	if w := p.LimitWatched; w != nil {
		c := p.LimitWatchedServerCPUPer1000WithAftermath
		fmt.Printf("  LIMIT watched %7.2fs %8.2fs %8.2fs (cmsync / LIMIT watched %.2fx %.2fx %.2fx; CPU with aftermath %.2f %.2f %.2f: %.2fx %.2fx %.2fx)\n",
			w.Create, w.Update, w.Delete, p.Cmsync.Create/w.Create, p.Cmsync.Update/w.Update, p.Cmsync.Delete/w.Delete,
			c.Create, c.Update, c.Delete, a.Create/c.Create, a.Update/c.Update, a.Delete/c.Delete)
	}
	for _, ph := range phaseSplits {
		fmt.Printf("  CPU %-6s cmsync phase %s   LIMIT phase %s\n", ph.name, cpuList(p.CmsyncCPU[ph.name]), cpuList(p.LimitCPU[ph.name]))
	}
	fmt.Printf("  API server allocated MiB per phase, medians:")
	for _, ph := range phaseSplits {
		allocated := func(rounds []Breakdown) float64 {
			return MedianOf(rounds, func(b Breakdown) float64 { return ph.get(b).ServerAllocatedMiB })
		}
		fmt.Printf(" %s %.1f/%.1f", ph.name, allocated(p.CmsyncBreakdown), allocated(p.LimitBreakdown))
	}
	fmt.Println()
	fmt.Printf("  memory steady %.1f MiB (%.1f anonymous, %.1f of the binary's file; peak %.1f)\n",
		p.Memory.SteadyMiB, p.Memory.AnonMiB, p.Memory.FileMiB, p.Memory.PeakMiB)
	fmt.Printf("  restart: ready %.2fs, verified %.2fs (of %v), %d writes\n",
		p.Restart.ReadySeconds, p.Restart.VerifiedSeconds, p.Restart.VerifiedRounds, p.Restart.Writes)
	fmt.Printf("  watches of ConfigMaps the API server closed for falling behind: %d\n", p.TerminatedWatchers)
	serverErrors := func(rounds []Breakdown) (n int) {
		for _, r := range rounds {
			n += r.Create.ServerErrors + r.Update.ServerErrors + r.Delete.ServerErrors
		}
		return n
	}
	fmt.Printf("  writes answered with a server error: cmsync %d, LIMIT %d\n\n", serverErrors(p.CmsyncBreakdown), serverErrors(p.LimitBreakdown))
}

// PrintResult prints a point's table (make bench).
func PrintResult(r Result) {
	fmt.Printf("\ncmsync benchmark — %s, N=%d namespaces, U=%d unrelated ConfigMaps\n", r.Machine, r.Namespaces, r.Unrelated)
	fmt.Printf("%-34s %10s %10s %8s   (medians of %d rounds)\n", "phase", "cmsync", "LIMIT", "ratio", r.Rounds)
	fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "FAN-OUT (create N replicas)", r.Cmsync.Create, r.Limit.Create, r.Ratios["fanOut/limitCreate"])
	fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "UPDATE (N replicas follow)", r.Cmsync.Update, r.Limit.Update, r.Ratios["update/limitUpdate"])
	fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "CLEANUP (N replicas deleted)", r.Cmsync.Delete, r.Limit.Delete, r.Ratios["cleanup/limitDelete"])
	printWhereTimeWent(r.CmsyncBreakdown, r.LimitBreakdown)
	if s := r.Secrets; s.Rounds > 0 {
		fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx   (Secrets, medians of %d rounds)\n", "SECRET FAN-OUT", s.Cmsync.Create, s.Limit.Create,
			r.Ratios["secret fanOut/limitCreate"], s.Rounds)
		fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "SECRET UPDATE", s.Cmsync.Update, s.Limit.Update, r.Ratios["secret update/limitUpdate"])
		fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "SECRET CLEANUP", s.Cmsync.Delete, s.Limit.Delete, r.Ratios["secret cleanup/limitDelete"])
		fmt.Printf("%-34s %10d\n", fmt.Sprintf("SECRET IDLE writes in %.0fs", r.IdleSeconds), s.IdleWrites)
	}
	printObjectSync(r)
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

// printWhereTimeWent prints, for each phase, the medians of where cmsync's and LIMIT's
// time went, and for cmsync where its pass fell in the phase.
func printWhereTimeWent(cmsync, limit []Breakdown) {
	fmt.Println("where the time went (medians; seconds before the first write, writing, after the last write):")
	for _, ph := range phaseSplits {
		c, l := medianSplit(cmsync, ph.get), medianSplit(limit, ph.get)
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
		fmt.Printf("  %-6s cmsync's pass: user's write done at %.3f s, first replica write %.3f s later (%d writes to the owner before it), "+
			"status written %.3f s after the last\n", "", c.SourceWritten, c.BeforeFirstWrite-c.SourceWritten,
			c.OwnerWritesBeforeFirstWrite, c.StatusAfterLastWrite)
		fmt.Printf("  %-6s CPU seconds: cmsync phase %s   LIMIT phase %s\n", "", cpuList(c.CPU), cpuList(l.CPU))
	}
}

// printObjectSync prints the ObjectSync rounds' figures, if they ran.
func printObjectSync(r Result) {
	o := r.ObjectSync
	if o.Rounds == 0 {
		return
	}
	ratio := func(c, l float64) float64 { return c / l }
	fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx   (ObjectSync of a NetworkPolicy, medians of %d rounds)\n", "OBJECTSYNC FAN-OUT",
		o.Cmsync.Create, o.Limit.Create, ratio(o.Cmsync.Create, o.Limit.Create), o.Rounds)
	fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "OBJECTSYNC UPDATE", o.Cmsync.Update, o.Limit.Update, ratio(o.Cmsync.Update, o.Limit.Update))
	fmt.Printf("%-34s %9.2fs %9.2fs %7.2fx\n", "OBJECTSYNC CLEANUP", o.Cmsync.Delete, o.Limit.Delete, ratio(o.Cmsync.Delete, o.Limit.Delete))
	if w := o.LimitWatched; w != nil {
		fmt.Printf("  LIMIT watched %7.2fs %8.2fs %8.2fs (cmsync / LIMIT watched %.2fx %.2fx %.2fx)\n",
			w.Create, w.Update, w.Delete, o.Cmsync.Create/w.Create, o.Cmsync.Update/w.Update, o.Cmsync.Delete/w.Delete)
	}
	printWhereTimeWent(o.CmsyncBreakdown, o.LimitBreakdown)
	fmt.Printf("%-34s %10d\n", fmt.Sprintf("OBJECTSYNC IDLE writes in %.0fs", r.IdleSeconds), o.IdleWrites)
	fmt.Printf("%-34s %9.2fs, %d writes\n", "OBJECTSYNC RESTART: ready", o.Restart.ReadySeconds, o.Restart.Writes)
	fmt.Printf("%-34s steady %.1f MiB, peak %.1f MiB\n", "MEMORY objectsync", o.Memory.SteadyMiB, o.Memory.PeakMiB)
}

// PrintScopedPoint prints one mode at one count of namespaces.
func PrintScopedPoint(p ScopedPoint) {
	fmt.Printf("  %-12s N=%-5d watches of ConfigMaps %5d  ready %6.2fs  fan-out %6.2fs (LIMIT %6.2fs, %.2fx)  memory steady %.1f MiB, peak %.1f MiB\n",
		p.Mode, p.Namespaces, p.ConfigMapWatches, p.ReadySeconds, p.FanOutSeconds, p.LimitCreateSeconds, p.FanOutSeconds/p.LimitCreateSeconds,
		p.Memory.SteadyMiB, p.Memory.PeakMiB)
}
