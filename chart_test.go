package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cmsync/cmsync/replicator"
)

// The chart's alerts and dashboard watch every controller cmsync runs: each selector of
// controller-runtime's series by controller name — the controller label of its reconcile
// metrics, the name label of its workqueue metrics — names cmsync's controllers as
// replicator.ControllerNames, the names Setup registers them by, gives them.

var (
	// seriesSelector is a metric name and its label matchers: `name{matchers}`.
	seriesSelector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^{}]*)\}`)
	// labelMatcher is one matcher: label, operator, value.
	labelMatcher = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
)

// controllerSelection is one matcher of a series by controller name, and where it is.
type controllerSelection struct {
	where, metric, op, value string
}

// controllerSelections finds, in text, every matcher that selects series by controller
// name: controller on any series, name on workqueue_ series (the workqueue of a
// controller is named as the controller).
func controllerSelections(where, text string) []controllerSelection {
	var found []controllerSelection
	for _, series := range seriesSelector.FindAllStringSubmatch(text, -1) {
		for _, m := range labelMatcher.FindAllStringSubmatch(series[2], -1) {
			if m[1] == "controller" || m[1] == "name" && strings.HasPrefix(series[1], "workqueue_") {
				found = append(found, controllerSelection{where: where, metric: series[1], op: m[2], value: m[3]})
			}
		}
	}
	return found
}

// stringsIn returns every string of a decoded JSON or YAML document.
func stringsIn(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var all []string
		for _, e := range v {
			all = append(all, stringsIn(e)...)
		}
		return all
	case map[string]any:
		var all []string
		for _, e := range v {
			all = append(all, stringsIn(e)...)
		}
		return all
	}
	return nil
}

// chartSelections reads the controller selections of the chart's alerts (expressions
// and the texts that quote them) and of its dashboard's queries.
func chartSelections(t *testing.T) []controllerSelection {
	t.Helper()
	files := []string{"deploy/chart/cmsync/files/alerts.yaml", "deploy/chart/cmsync/files/dashboard.json"}
	found := make([]controllerSelection, 0, 2*len(files)) // an alternation in each of their two places
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if strings.HasSuffix(file, ".json") {
			err = json.Unmarshal(raw, &doc)
		} else {
			err = yaml.Unmarshal(raw, &doc)
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, s := range stringsIn(doc) {
			found = append(found, controllerSelections(file, s)...)
		}
	}
	return found
}

func TestChartSelectsEveryController(t *testing.T) {
	names := replicator.ControllerNames()
	if !slices.Contains(names, "secretsync") || !slices.Contains(names, "configmapsync") {
		t.Fatalf("replicator.ControllerNames() = %v, want the explicit kinds' controllers among them", names)
	}
	want := slices.Sorted(slices.Values(names))
	selections := chartSelections(t)
	for _, page := range docPages(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		selections = append(selections, controllerSelections(page, string(raw))...)
	}
	alternations := 0
	for _, s := range selections {
		switch s.op {
		case "=~": // the chart's selection of all of cmsync's controllers
			alternations++
			if got := slices.Sorted(slices.Values(strings.Split(s.value, "|"))); !slices.Equal(got, want) {
				t.Errorf("%s: %s selects controllers %q, want exactly %q", s.where, s.metric, s.value, strings.Join(want, "|"))
			}
		case "=": // one controller, as a page's example
			if !slices.Contains(names, s.value) {
				t.Errorf("%s: %s selects controller %q, which cmsync does not register (it registers %v)", s.where, s.metric, s.value, want)
			}
		default:
			t.Errorf("%s: %s selects controllers with %s%q: name them with =~ or =", s.where, s.metric, s.op, s.value)
		}
	}
	// CmsyncReconcileErrors and the latency hint in alerts.yaml, the reconcile-errors
	// and workqueue panels of the dashboard.
	if alternations < 4 {
		t.Errorf("found %d selections of cmsync's controllers in the chart, want at least 4: %v", alternations, selections)
	}
	// The runbook names the values the alert's controller label takes.
	raw, err := os.ReadFile("docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, runbook, _ := strings.Cut(string(raw), "#### CmsyncReconcileErrors\n")
	runbook, _, _ = strings.Cut(runbook, "\n#")
	for _, name := range names {
		if !strings.Contains(runbook, "`"+name+"`") {
			t.Errorf("docs/operations.md#cmsyncreconcileerrors does not name the controller %s", name)
		}
	}
}

// The checkout's chart defaults to an image that its version's release pushes: the
// release workflow, run on tag vX.Y.Z, pushes the image REGISTRY/cmsync:vX.Y.Z (make
// image) and the chart as X.Y.Z, and refuses a tag whose chart is another version.

// releaseWorkflow is what the test reads of .github/workflows/release.yaml. Its "on"
// key is decoded as YAML 1.1 reads it: the boolean true.
type releaseWorkflow struct {
	On struct {
		Push struct {
			Tags []string `json:"tags"`
		} `json:"push"`
	} `json:"true"`
	Jobs map[string]struct {
		Env   map[string]string `json:"env"`
		Steps []struct {
			Run string `json:"run"`
		} `json:"steps"`
	} `json:"jobs"`
}

// readYAML decodes a YAML file into v.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// releasedImage is the repository and the tag the release workflow pushes for a chart
// of version chartVersion, from the workflow and the Makefile's image target.
func releasedImage(t *testing.T, chartVersion string) (repository, tag string) {
	t.Helper()
	var wf releaseWorkflow
	readYAML(t, ".github/workflows/release.yaml", &wf)
	job, ok := wf.Jobs["release"]
	if !slices.Equal(wf.On.Push.Tags, []string{"v*"}) || !ok || job.Env["IMAGE_TAG"] != "${{ github.ref_name }}" {
		t.Fatalf("release.yaml: want a release job on tags v*, IMAGE_TAG the tag; got tags %v, env %v", wf.On.Push.Tags, job.Env)
	}
	var chartFromTag, tagChecked bool
	for _, step := range job.Steps {
		chartFromTag = chartFromTag || strings.Contains(step.Run, `version="${IMAGE_TAG#v}"`) && strings.Contains(step.Run, `CHART_VERSION="$version"`)
		tagChecked = tagChecked || strings.Contains(step.Run, `"version: ${IMAGE_TAG#v}"`) && strings.Contains(step.Run, "deploy/chart/cmsync/Chart.yaml")
	}
	if !chartFromTag || !tagChecked {
		t.Errorf(
			"release.yaml: want the chart pushed as the tag without its v (%v), and a tag refused whose Chart.yaml is another version (%v)",
			chartFromTag,
			tagChecked,
		)
	}
	makefile, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(makefile), "KO_DOCKER_REPO=$(REGISTRY)/cmsync ") {
		t.Errorf("Makefile: make image no longer pushes $(REGISTRY)/cmsync")
	}
	return job.Env["REGISTRY"] + "/cmsync", "v" + chartVersion
}

func TestChartDefaultImageIsTheReleases(t *testing.T) {
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, "deploy/chart/cmsync/Chart.yaml", &chart)
	var values struct {
		Image struct{ Repository, Tag, Digest string } `json:"image"`
	}
	readYAML(t, "deploy/chart/cmsync/values.yaml", &values)
	repository, tag := releasedImage(t, chart.Version)
	if values.Image.Tag != "" || values.Image.Digest != "" {
		t.Errorf(
			"values.yaml: image.tag %q, image.digest %q: want both empty, the image defaulting to the chart's appVersion",
			values.Image.Tag,
			values.Image.Digest,
		)
	}
	if values.Image.Repository != repository {
		t.Errorf("values.yaml: image.repository %q, but releases push %s", values.Image.Repository, repository)
	}
	if chart.AppVersion != tag {
		t.Errorf("Chart.yaml: appVersion %q makes the default image %s:%s, but the release of version %s pushes %s:%s",
			chart.AppVersion, values.Image.Repository, chart.AppVersion, chart.Version, repository, tag)
	}
}

// sizingRuleText is how docs/support.md#sizing states its rule, without and with Secrets.
var sizingRuleText = regexp.MustCompile(
	`at least \*\*(\d+) MiB \+ ([\d.]+) MiB per namespace served\*\*; with Secrets enabled,.*? (\d+) MiB \+ ([\d.]+) MiB per namespace`)

// sizingRule reads docs/support.md's memory rule for scoped mode: a base and a part per
// namespace served, in MiB, without and with Secrets.
func sizingRule(t *testing.T) (base, perNamespace, perNamespaceWithSecrets float64) {
	t.Helper()
	raw, err := os.ReadFile("docs/support.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(raw)), " ")
	rule := sizingRuleText.FindStringSubmatch(text)
	if rule == nil {
		t.Fatal("docs/support.md#sizing states no rule of the form \"at least **B MiB + P MiB per namespace served**\"")
	}
	number := func(s string) float64 {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if rule[1] != rule[3] {
		t.Fatalf("docs/support.md: two bases, %s and %s MiB", rule[1], rule[3])
	}
	return number(rule[1]), number(rule[2]), number(rule[4])
}

// scopedMemoryPoints reads the memory cmsync measured at each point of make bench-scoped:
// its mode, the namespaces, and the peak resident MiB.
func scopedMemoryPoints(t *testing.T, file string) []struct {
	Mode       string
	Namespaces int
	Memory     struct{ SteadyMiB, PeakMiB float64 }
} {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var result struct {
		Points []struct {
			Mode       string
			Namespaces int
			Memory     struct{ SteadyMiB, PeakMiB float64 }
		}
	}
	if err := json.Unmarshal(raw, &result); err != nil || len(result.Points) == 0 {
		t.Fatalf("%s: %v (%d points)", file, err, len(result.Points))
	}
	return result.Points
}

// The memory the docs tell users to give cmsync holds what was measured: the chart's
// default limit holds the peak of every default-mode point and of scoped mode up to the
// namespaces docs/scoped-mode.md recommends it for (a few hundred: the points up to
// 100), and docs/support.md's rule for scoped mode holds the peak of every scoped point.
// The install notes print that rule (TestInstallNotesEstimateMemory).
func TestChartMemoryHoldsWhatWasMeasured(t *testing.T) {
	base, perNamespace, _ := sizingRule(t)
	limit, ok := chartValue(chartValues(t), "resources.limits.memory")
	if !ok {
		t.Fatal("values.yaml sets no resources.limits.memory")
	}
	limitMiB, err := strconv.ParseFloat(strings.TrimSuffix(limit.(string), "Mi"), 64)
	if err != nil {
		t.Fatalf("resources.limits.memory %v: want a value in Mi", limit)
	}
	const file = "bench/results/scoped-20261128-171414.json"
	raw, err := os.ReadFile("docs/support.md")
	if err != nil || !strings.Contains(string(raw), file) {
		t.Fatalf("docs/support.md does not cite %s (%v)", file, err)
	}
	for _, p := range scopedMemoryPoints(t, file) {
		if rule := base + perNamespace*float64(p.Namespaces); p.Mode == "scoped" && rule < p.Memory.PeakMiB {
			t.Errorf("scoped mode at %d namespaces peaked at %.0f MiB, over the %.0f MiB docs/support.md gives it", p.Namespaces, p.Memory.PeakMiB, rule)
		}
		if (p.Mode != "scoped" || p.Namespaces <= 100) && limitMiB < p.Memory.PeakMiB {
			t.Errorf("%s mode at %d namespaces peaked at %.0f MiB, over the chart's default limit %v", p.Mode, p.Namespaces, p.Memory.PeakMiB, limit)
		}
	}
}
