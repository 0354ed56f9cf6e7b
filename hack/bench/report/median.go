package report

import "slices"

// Medians are the per-phase medians of rounds.
func Medians(rounds []Phases) Phases {
	median := func(get func(Phases) float64) float64 { return MedianOf(rounds, get) }
	return Phases{
		Create: median(func(p Phases) float64 { return p.Create }),
		Update: median(func(p Phases) float64 { return p.Update }),
		Delete: median(func(p Phases) float64 { return p.Delete }),
	}
}

// MedianOf is the median of value over rounds: of an even number, the mean of the
// middle two (of two rounds, one with LIMIT first and one with cmsync first, their
// mean rather than the larger).
func MedianOf[R any](rounds []R, value func(R) float64) float64 {
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
		return MedianOf(rounds, func(b Breakdown) float64 { return field(get(b)) })
	}
	cpu := map[string]float64{}
	for _, r := range rounds {
		for name := range get(r).CPU {
			cpu[name] = median(func(s Split) float64 { return s.CPU[name] })
		}
	}
	return Split{
		BeforeFirstWrite:            median(func(s Split) float64 { return s.BeforeFirstWrite }),
		Writing:                     median(func(s Split) float64 { return s.Writing }),
		AfterLastWrite:              median(func(s Split) float64 { return s.AfterLastWrite }),
		Writes:                      int(median(func(s Split) float64 { return float64(s.Writes) })),
		LatencyMillis:               median(func(s Split) float64 { return s.LatencyMillis }),
		InFlight:                    median(func(s Split) float64 { return s.InFlight }),
		SourceWritten:               median(func(s Split) float64 { return s.SourceWritten }),
		OwnerWritesBeforeFirstWrite: int(median(func(s Split) float64 { return float64(s.OwnerWritesBeforeFirstWrite) })),
		StatusAfterLastWrite:        median(func(s Split) float64 { return s.StatusAfterLastWrite }),
		CPU:                         cpu,
	}
}

// phaseSplits names the phases of a Breakdown.
var phaseSplits = []struct {
	name string
	get  func(Breakdown) Split
}{
	{"create", func(b Breakdown) Split { return b.Create }},
	{"update", func(b Breakdown) Split { return b.Update }},
	{"delete", func(b Breakdown) Split { return b.Delete }},
}

// cpuMedians are the medians of each process's CPU seconds, by phase.
func cpuMedians(rounds []Breakdown) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, ph := range phaseSplits {
		out[ph.name] = medianSplit(rounds, ph.get).CPU
	}
	return out
}

// serverCPUPer1000 is the median over the rounds of kube-apiserver's and etcd's CPU
// seconds per 1,000 writes, by phase, from the CPU figures cpuOf picks.
func serverCPUPer1000(rounds []Breakdown, writes int, cpuOf func(Split) map[string]float64) Phases {
	per := func(get func(Breakdown) Split) float64 {
		return MedianOf(rounds, func(b Breakdown) float64 {
			cpu := cpuOf(get(b))
			return (cpu["kube-apiserver"] + cpu["etcd"]) / float64(writes) * 1000
		})
	}
	return Phases{Create: per(phaseSplits[0].get), Update: per(phaseSplits[1].get), Delete: per(phaseSplits[2].get)}
}

// Summarize takes the medians of the point's rounds and their ratios.
func (p *Point) Summarize() {
	p.Limit, p.Cmsync = Medians(p.LimitRounds), Medians(p.CmsyncRounds)
	p.Ratios = Phases{Create: p.Cmsync.Create / p.Limit.Create, Update: p.Cmsync.Update / p.Limit.Update, Delete: p.Cmsync.Delete / p.Limit.Delete}
	p.LimitCPU, p.CmsyncCPU = cpuMedians(p.LimitBreakdown), cpuMedians(p.CmsyncBreakdown)
	atEnd := func(s Split) map[string]float64 { return s.CPU }
	withAftermath := func(s Split) map[string]float64 { return s.CPUWithAftermath }
	p.LimitServerCPUPer1000 = serverCPUPer1000(p.LimitBreakdown, p.Replicas, atEnd)
	p.CmsyncServerCPUPer1000 = serverCPUPer1000(p.CmsyncBreakdown, p.Replicas, atEnd)
	p.LimitServerCPUPer1000WithAftermath = serverCPUPer1000(p.LimitBreakdown, p.Replicas, withAftermath)
	p.CmsyncServerCPUPer1000WithAftermath = serverCPUPer1000(p.CmsyncBreakdown, p.Replicas, withAftermath)
	if len(p.LimitWatchedRounds) > 0 {
		watched := Medians(p.LimitWatchedRounds)
		cpu := serverCPUPer1000(p.LimitWatchedBreakdown, p.Replicas, withAftermath)
		p.LimitWatched, p.LimitWatchedServerCPUPer1000WithAftermath = &watched, &cpu
	}
}
