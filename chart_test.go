package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// helmBinary is the pinned helm (HELM, or hack/tool.sh's build of it).
func helmBinary(t *testing.T) string {
	t.Helper()
	if helm := os.Getenv("HELM"); helm != "" {
		return helm
	}
	out, err := exec.Command("hack/tool.sh", "helm").Output()
	if err != nil {
		t.Fatalf("hack/tool.sh helm: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// chartNamespace is the namespace the tests render the chart's release into.
const chartNamespace = "cmsync-system"

// renderChart runs helm template on the chart, with ValidatingAdmissionPolicy served and
// sets (--set each), and returns its objects; or helm's error output.
func renderChart(t *testing.T, sets ...string) ([]map[string]any, error) {
	t.Helper()
	args := make([]string, 0, 7+2*len(sets))
	args = append(args, "template", "cmsync", "deploy/chart/cmsync", "--namespace", chartNamespace,
		"--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(helmBinary(t), args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, out)
	}
	var objects []map[string]any
	for _, doc := range strings.Split(string(out), "\n---\n") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("helm template %v: %v\n%s", sets, err, doc)
		}
		if len(obj) > 0 {
			objects = append(objects, obj)
		}
	}
	return objects, nil
}

// rendered is what the tests read of a rendering: cmsync's arguments, the rules of its
// ClusterRole and of each namespace's Role, and the protect-replicas policy's resource rules.
type rendered struct {
	args          []string
	clusterRules  []rbacv1.PolicyRule
	roleRules     map[string][]rbacv1.PolicyRule
	admissionKind []admissionv1.NamedRuleWithOperations
}

// renderFor renders the chart with sets, failing the test if helm does.
func renderFor(t *testing.T, sets ...string) rendered {
	t.Helper()
	objects, err := renderChart(t, sets...)
	if err != nil {
		t.Fatalf("helm template %v: %v", sets, err)
	}
	r := rendered{roleRules: map[string][]rbacv1.PolicyRule{}}
	for _, obj := range objects {
		raw, _ := json.Marshal(obj)
		name, _ := chartValue(obj, "metadata.name")
		switch obj["kind"] {
		case "Deployment":
			var d appsv1.Deployment
			must(t, json.Unmarshal(raw, &d))
			r.args = d.Spec.Template.Spec.Containers[0].Args
		case "ClusterRole":
			var role rbacv1.ClusterRole
			must(t, json.Unmarshal(raw, &role))
			if name == "cmsync" {
				r.clusterRules = role.Rules
			}
		case "Role":
			var role rbacv1.Role
			must(t, json.Unmarshal(raw, &role))
			if name == "cmsync" {
				r.roleRules[role.Namespace] = role.Rules
			}
		case "ValidatingAdmissionPolicy":
			var policy admissionv1.ValidatingAdmissionPolicy
			must(t, json.Unmarshal(raw, &policy))
			if name == "cmsync-protect-replicas" {
				r.admissionKind = policy.Spec.MatchConstraints.ResourceRules
			}
		}
	}
	return r
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// objectVerbs are the verbs the ObjectSync controller uses on an enabled kind, and
// checks at its start that it holds (replicator.checkGrants).
var objectVerbs = []string{"create", "delete", "get", "list", "patch", "update", "watch"}

// grants lists the verbs rules grant on group/resource.
func grants(rules []rbacv1.PolicyRule, group, resource string) []string {
	var verbs []string
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) {
			verbs = append(verbs, r.Verbs...)
		}
	}
	slices.Sort(verbs)
	return verbs
}

// The chart's objectSync.kinds: the flag, exactly the kinds' verbs under the kinds'
// resource names (the English plural, or objectSync.resources), the ObjectSync verbs
// only with a kind listed, escalate only with Role and bind only with RoleBinding, and
// the admission policy over the kinds.
func TestChartObjectKindsGrantExactlyTheirVerbs(t *testing.T) {
	none := renderFor(t)
	if slices.ContainsFunc(none.args, func(a string) bool { return strings.HasPrefix(a, "--object-kinds") }) ||
		grants(none.clusterRules, "cmsync.io", "objectsyncs") != nil || len(none.admissionKind) != 1 {
		t.Errorf("without objectSync.kinds: args %v, objectsyncs verbs %v, admission rules %v",
			none.args, grants(none.clusterRules, "cmsync.io", "objectsyncs"), none.admissionKind)
	}
	kinds := map[string]schema.GroupResource{ // entry: the resource the chart must name
		"networking.k8s.io/v1/NetworkPolicy":     {Group: "networking.k8s.io", Resource: "networkpolicies"},
		"v1/LimitRange":                          {Resource: "limitranges"},
		"gateway.networking.k8s.io/v1/Gateway":   {Group: "gateway.networking.k8s.io", Resource: "gateways"},
		"networking.istio.io/v1/Sidecar":         {Group: "networking.istio.io", Resource: "sidecars"},
		"example.com/v1alpha1/Mesh":              {Group: "example.com", Resource: "meshes"},
		"example.com/v1alpha1/Box":               {Group: "example.com", Resource: "boxes"},
		"example.com/v1alpha1/Endpoints":         {Group: "example.com", Resource: "endpoints"}, // by objectSync.resources
		"keda.sh/v1alpha1/TriggerAuthentication": {Group: "keda.sh", Resource: "triggerauthentications"},
	}
	entries := slices.Sorted(maps.Keys(kinds))
	r := renderFor(t, "objectSync.kinds={"+strings.Join(entries, ",")+"}", "objectSync.resources.example\\.com/v1alpha1/Endpoints=endpoints")
	if !slices.Contains(r.args, "--object-kinds="+strings.Join(entries, ",")) {
		t.Errorf("args %v, want --object-kinds=%s", r.args, strings.Join(entries, ","))
	}
	for entry, gr := range kinds {
		if got := grants(r.clusterRules, gr.Group, gr.Resource); !slices.Equal(got, objectVerbs) {
			t.Errorf("%s: the ClusterRole grants %v on %s, want %v", entry, got, gr, objectVerbs)
		}
		if !slices.ContainsFunc(r.admissionKind, func(rule admissionv1.NamedRuleWithOperations) bool {
			return slices.Equal(rule.APIGroups, []string{gr.Group}) && slices.Equal(rule.Resources, []string{gr.Resource})
		}) {
			t.Errorf("%s: the admission policy does not match %s: %+v", entry, gr, r.admissionKind)
		}
	}
	for _, resource := range []string{"objectsyncs", "objectsyncs/status"} {
		if got, want := grants(r.clusterRules, "cmsync.io", resource), generatedGrants(t, resource); !slices.Equal(got, want) {
			t.Errorf("%s: granted %v, want the controller's %v", resource, got, want)
		}
	}
	for _, verb := range []string{"escalate", "bind"} {
		if slices.ContainsFunc(r.clusterRules, func(rule rbacv1.PolicyRule) bool { return slices.Contains(rule.Verbs, verb) }) {
			t.Errorf("without Role or RoleBinding listed, the chart grants %s", verb)
		}
	}
	rbac := renderFor(t, "objectSync.kinds={rbac.authorization.k8s.io/v1/Role,rbac.authorization.k8s.io/v1/RoleBinding}")
	for resource, want := range map[string][]string{
		"roles":        {"bind", "create", "delete", "escalate", "get", "list", "patch", "update", "watch"},
		"clusterroles": {"bind"}, "rolebindings": objectVerbs,
	} {
		if got := grants(rbac.clusterRules, "rbac.authorization.k8s.io", resource); !slices.Equal(got, want) {
			t.Errorf("with Role and RoleBinding listed: %v on %s, want %v", got, resource, want)
		}
	}
	roleOnly := renderFor(t, "objectSync.kinds={rbac.authorization.k8s.io/v1/Role}")
	if got := grants(roleOnly.clusterRules, "rbac.authorization.k8s.io", "clusterroles"); got != nil {
		t.Errorf("with Role alone listed: %v on clusterroles, want none", got)
	}
}

// generatedGrants are the verbs the controller's RBAC markers give resource of cmsync.io.
func generatedGrants(t *testing.T, resource string) []string {
	t.Helper()
	var role rbacv1.ClusterRole
	readYAML(t, "deploy/chart/cmsync/files/clusterrole.yaml", &role)
	return grants(role.Rules, "cmsync.io", resource)
}

// In scoped mode the kinds' verbs are each served namespace's Role's, and the
// ClusterRole has none.
func TestChartScopedModeGrantsObjectKindsByRole(t *testing.T) {
	r := renderFor(t, "scope.namespaces={team-a,team-b}", "objectSync.kinds={networking.k8s.io/v1/NetworkPolicy,rbac.authorization.k8s.io/v1/Role}")
	for _, resource := range []string{"networkpolicies", "roles"} {
		group := map[string]string{"networkpolicies": "networking.k8s.io", "roles": "rbac.authorization.k8s.io"}[resource]
		if got := grants(r.clusterRules, group, resource); got != nil {
			t.Errorf("scoped mode: the ClusterRole grants %v on %s", got, resource)
		}
		for _, ns := range []string{"team-a", "team-b"} {
			want := objectVerbs
			if resource == "roles" {
				want = []string{"create", "delete", "escalate", "get", "list", "patch", "update", "watch"}
			}
			if got := grants(r.roleRules[ns], group, resource); !slices.Equal(got, want) {
				t.Errorf("scoped mode: the Role in %s grants %v on %s, want %v", ns, got, resource, want)
			}
		}
	}
}

// A kind cmsync would refuse fails the install, saying what to write instead.
func TestChartRefusesAMalformedObjectKind(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		says string
	}{
		{"a kind alone", []string{"objectSync.kinds={NetworkPolicy}"}, `"NetworkPolicy" is not a kind: write group/version/Kind`},
		{"a lower-case kind", []string{"objectSync.kinds={networking.k8s.io/v1/networkpolicy}"}, "is not a kind"},
		{"no version", []string{"objectSync.kinds={networking.k8s.io/NetworkPolicy}"}, "is not a kind"},
		{"the core group named", []string{"objectSync.kinds={core/v1/LimitRange}"}, "the core group has no name: write v1/LimitRange"},
		{"ConfigMap", []string{"objectSync.kinds={v1/ConfigMap}"}, "ConfigMaps are copied by the cmsync.io/replicate label or a ConfigMapSync"},
		{"Secret", []string{"objectSync.kinds=v1/LimitRange\\,v1/Secret"}, "Secrets are copied by the cmsync.io/replicate label or a SecretSync"},
		{"a resource for a kind not listed", []string{"objectSync.kinds={v1/LimitRange}", "objectSync.resources.v1/ResourceQuota=resourcequotas"},
			`"v1/ResourceQuota" is not listed in objectSync.kinds`},
		{"a resource that is no name", []string{"objectSync.kinds={v1/LimitRange}", "objectSync.resources.v1/LimitRange=Limit Ranges"},
			"is not a resource name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChart(t, tc.sets...)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("helm template %v: %v, want a refusal saying %q", tc.sets, err, tc.says)
			}
		})
	}
}

// fullnameOverride names every object of the release, and the admission policy exempts
// the ServiceAccount so named; the labels kubectl cmsync finds the release by stay.
func TestChartFullnameOverrideNamesEveryObject(t *testing.T) {
	objects, err := renderChart(t, "fullnameOverride=replicator")
	must(t, err)
	var policies int
	for _, obj := range objects {
		name, _ := chartValue(obj, "metadata.name")
		if !strings.HasPrefix(fmt.Sprint(name), "replicator") {
			t.Errorf("%v %v is not named by fullnameOverride", obj["kind"], name)
		}
		if obj["kind"] == "Deployment" {
			labels, _ := chartValue(obj, "metadata.labels")
			if label := labels.(map[string]any)["app.kubernetes.io/name"]; label != "cmsync" {
				t.Errorf("the Deployment's name label %v, want cmsync (kubectl cmsync finds the release by it)", label)
			}
		}
		if obj["kind"] == "ValidatingAdmissionPolicy" {
			raw, _ := json.Marshal(obj)
			if strings.Contains(string(raw), "protect-replicas") {
				policies++
				if !strings.Contains(string(raw), "system:serviceaccount:"+chartNamespace+":replicator") {
					t.Errorf("the protect-replicas policy does not exempt the ServiceAccount replicator")
				}
			}
		}
	}
	if policies != 1 {
		t.Errorf("%d protect-replicas policies rendered", policies)
	}
	if _, err := renderChart(t, "fullnameOverride=Not_A_Name"); err == nil {
		t.Errorf("a fullnameOverride that is no object name was accepted")
	}
}
