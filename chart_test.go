package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
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
