package report

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The plots of a sweep, for the README:
//   - namespaces.png: time against the namespaces (one source), cmsync and LIMIT;
//   - sources.png: time against the sources changed at once, at -sweep-base-n;
//   - size.png: time against the object size, at -sweep-base-n;
//   - memory.png: cmsync's resident size against the replicas it holds;
//   - server-cpu.png: kube-apiserver's and etcd's CPU seconds per 1,000 writes, cmsync's
//     against LIMIT's, at every point.

var (
	phaseColors = []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}}
	limitDashes = []vg.Length{vg.Points(5), vg.Points(3)}
	// phaseValues names the phases and reads each from Phases.
	phaseValues = []struct {
		name string
		get  func(Phases) float64
	}{
		{"fan-out", func(ph Phases) float64 { return ph.Create }},
		{"update", func(ph Phases) float64 { return ph.Update }},
		{"cleanup", func(ph Phases) float64 { return ph.Delete }},
	}
)

// DrawSweep reads one or more sweeps' JSON (comma-separated paths) and writes their
// plots into dir. Points of the same N, S and size in a later file replace the earlier
// ones.
func DrawSweep(paths, dir string) error {
	var res SweepResult
	for _, path := range strings.Split(paths, ",") {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var one SweepResult
		if err := json.Unmarshal(data, &one); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, p := range one.Points {
			res.Points = slices.DeleteFunc(res.Points, func(q Point) bool {
				return q.Namespaces == p.Namespaces && q.Sources == p.Sources && q.SizeBytes == p.SizeBytes
			})
			res.Points = append(res.Points, p)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := res.basePoint()
	series := []struct {
		file, title, x string
		pick           func(Point) (float64, bool)
	}{
		{"namespaces.png", "One 1 KiB source to N namespaces", "namespaces (N)",
			func(p Point) (float64, bool) { return float64(p.Namespaces), p.Sources == 1 && p.SizeBytes == 1024 }},
		{"sources.png", fmt.Sprintf("S sources changed at once, %d namespaces, 1 KiB", base), "sources (S)",
			func(p Point) (float64, bool) { return float64(p.Sources), p.Namespaces == base && p.SizeBytes == 1024 }},
		{"size.png", fmt.Sprintf("One source of Z KiB to %d namespaces", base), "object size (KiB)",
			func(p Point) (float64, bool) {
				return float64(p.SizeBytes) / 1024, p.Namespaces == base && p.Sources == 1
			}},
	}
	for _, s := range series {
		if err := drawTimes(filepath.Join(dir, s.file), s.title, s.x, res.Points, s.pick); err != nil {
			return err
		}
	}
	if err := drawMemory(filepath.Join(dir, "memory.png"), res.Points); err != nil {
		return err
	}
	if err := drawServerCPU(filepath.Join(dir, "server-cpu.png"), res.Points); err != nil {
		return err
	}
	fmt.Println("plots:", dir)
	return nil
}

// basePoint is the namespaces of the points that vary the sources or the size: the
// namespaces shared by the most points.
func (r SweepResult) basePoint() int {
	count := map[int]int{}
	best := 0
	for _, p := range r.Points {
		count[p.Namespaces]++
		if count[p.Namespaces] > count[best] {
			best = p.Namespaces
		}
	}
	return best
}

// drawTimes plots each phase's median seconds, cmsync solid and LIMIT dashed, against
// the x that pick gives the points it selects, both on log scales.
func drawTimes(file, title, xLabel string, points []Point, pick func(Point) (float64, bool)) error {
	p := newPlot(title, xLabel, "seconds (median, log scale)")
	var xs []float64
	for _, pt := range points {
		if x, ok := pick(pt); ok {
			xs = append(xs, x)
		}
	}
	logScale(p, xs)
	// Time grows with the writes: on log-log axes cmsync and LIMIT are parallel lines
	// whose gap is the ratio.
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	for i, ph := range phaseValues {
		var cmsync, limit plotter.XYs
		for _, pt := range points {
			if x, ok := pick(pt); ok {
				cmsync = append(cmsync, plotter.XY{X: x, Y: ph.get(pt.Cmsync)})
				limit = append(limit, plotter.XY{X: x, Y: ph.get(pt.Limit)})
			}
		}
		if err := addLine(p, "cmsync "+ph.name, cmsync, phaseColors[i], nil); err != nil {
			return err
		}
		if err := addLine(p, "LIMIT "+ph.name, limit, phaseColors[i], limitDashes); err != nil {
			return err
		}
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, file)
}

// drawMemory plots cmsync's resident size (steady and peak) against its replicas.
func drawMemory(file string, points []Point) error {
	p := newPlot("cmsync's memory with its replicas in place", "replicas", "MiB resident")
	var steady, peak plotter.XYs
	var xs []float64
	for _, pt := range points {
		if pt.SizeBytes == 1024 {
			xs = append(xs, float64(pt.Replicas))
			steady = append(steady, plotter.XY{X: float64(pt.Replicas), Y: pt.Memory.SteadyMiB})
			peak = append(peak, plotter.XY{X: float64(pt.Replicas), Y: pt.Memory.PeakMiB})
		}
	}
	logScale(p, xs)
	if err := addLine(p, "steady", steady, phaseColors[0], nil); err != nil {
		return err
	}
	if err := addLine(p, "peak", peak, phaseColors[1], limitDashes); err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, file)
}

// drawServerCPU plots, for every point and phase, the API server's and etcd's CPU
// seconds per 1,000 writes, cmsync's next to LIMIT's.
func drawServerCPU(file string, points []Point) error {
	p := newPlot("kube-apiserver + etcd CPU per 1,000 writes (median)", "", "CPU seconds")
	n := len(points) * len(phaseValues)
	names, cmsync, limit := make([]string, 0, n), make(plotter.Values, 0, n), make(plotter.Values, 0, n)
	for _, pt := range points {
		for _, ph := range phaseValues {
			// One line: a label of several lines, turned upright, runs into its neighbours'.
			names = append(names, fmt.Sprintf("%s, N=%d S=%d %s", ph.name, pt.Namespaces, pt.Sources, sizeLabel(pt.SizeBytes)))
			cmsync = append(cmsync, ph.get(pt.CmsyncServerCPUPer1000))
			limit = append(limit, ph.get(pt.LimitServerCPUPer1000))
		}
	}
	width := vg.Points(5)
	for i, bars := range []struct {
		name   string
		values plotter.Values
	}{{"cmsync", cmsync}, {"LIMIT", limit}} {
		b, err := plotter.NewBarChart(bars.values, width)
		if err != nil {
			return err
		}
		b.Color, b.LineStyle.Width = phaseColors[i], 0
		b.Offset = width * vg.Length(2*i-1) / 2
		p.Add(b)
		p.Legend.Add(bars.name, b)
	}
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = 1.5708
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	return p.Save(vg.Length(max(7, len(names)/3))*vg.Inch, 5.5*vg.Inch, file)
}

// logScale makes the x axis logarithmic when xs spans more than one value (a log axis
// of a single value has no range).
func logScale(p *plot.Plot, xs []float64) {
	if len(xs) > 0 && slices.Min(xs) > 0 && slices.Min(xs) < slices.Max(xs) {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
}

func sizeLabel(bytes int) string {
	if bytes%1024 == 0 {
		return fmt.Sprintf("%d KiB", bytes/1024)
	}
	return fmt.Sprintf("%d B", bytes)
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return p
}

// addLine adds a line with points, sorted by x, to the plot and its legend.
func addLine(p *plot.Plot, name string, xys plotter.XYs, c color.Color, dashes []vg.Length) error {
	if len(xys) == 0 {
		return nil
	}
	sort.Slice(xys, func(i, j int) bool { return xys[i].X < xys[j].X })
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	line.Color, line.Dashes, points.Color = c, dashes, c
	p.Add(line, points)
	p.Legend.Add(name, line, points)
	return nil
}
