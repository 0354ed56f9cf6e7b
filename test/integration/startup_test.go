package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cmsync/cmsync/internal/startup"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
	"github.com/cmsync/cmsync/replicator"
)

// startupRecheck is how often a start looks again for more it may serve (internal/startup).
const startupRecheck = 30 * time.Second

// The reasons cmsync starts again to serve more, and the wait of a start that can serve
// none of its --namespaces, each against a real API server. A row's start is
// internal/startup's but for the exec: the scope at the start, replicator.Setup, the
// start-again checks, the manager. Before the row's change nothing more happens for a
// whole recheck; after it, the start goes on, or cmsync starts again saying why.
func TestStartAgainReasons(t *testing.T) {
	bare, err := controlplane.Start() // no CRDs installed
	must(t, err)
	t.Cleanup(func() { _ = bare.Stop() })
	admin, err := client.New(bare.Config, client.Options{Scheme: newScheme()})
	must(t, err)
	// The chart's grants in scoped mode: namespaces cluster-wide, ConfigMaps by a Role
	// in each listed namespace.
	_, scoped, err := bare.AddUser("cmsync-scoped")
	must(t, err)
	grant(t, admin, "", namespacesRule)
	for _, row := range startRows(bare, admin, scoped) {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			row.run(t, bare, admin)
		})
	}
}

// startRow is a reason to start again, or to go on with a start.
type startRow struct {
	name    string
	listed  []string                  // --namespaces: each is made with its Role, but "later"
	roleOff bool                      // "later" is made at the start, without its Role
	asked   *rest.Config              // the identity the scope's checks ask for
	options func(*replicator.Options) // the other flags
	change  func(t *testing.T, ns func(string) string)
	before  string // what the start reports before the change ("": nothing)
	want    string // what it reports after the change
}

func startRows(bare *controlplane.Env, admin client.Client, scoped *rest.Config) []startRow {
	noCRD := func(o *replicator.Options) { o.ConfigMapSync = replicator.SyncDisabled }
	return []startRow{{
		name:   "a start that can serve none of its --namespaces waits for one",
		listed: []string{"later"}, asked: bare.Config, options: noCRD,
		change: func(t *testing.T, ns func(string) string) { makeNamespace(t, admin, ns("later")) },
		before: "", want: "serving [later]",
	}, {
		name:   "a listed namespace created after the start",
		listed: []string{"served", "later"}, asked: bare.Config, options: noCRD,
		change: func(t *testing.T, ns func(string) string) { makeNamespace(t, admin, ns("later")) },
		before: "serving [served]", want: "starting again: listed namespaces now reachable: [later]",
	}, {
		name:   "a listed namespace where cmsync may list only after the start",
		listed: []string{"served", "later"}, roleOff: true, asked: scoped, options: noCRD,
		change: func(t *testing.T, ns func(string) string) { grant(t, admin, ns("later"), configMapsRule) },
		before: "serving [served]", want: "starting again: listed namespaces now reachable: [later]",
	}, {
		name:    "the ConfigMapSync CRD installed after a start in auto",
		asked:   bare.Config,
		options: func(o *replicator.Options) { o.ConfigMapSync = replicator.SyncAuto },
		change:  func(t *testing.T, _ func(string) string) { installCRD(t, bare, "cmsync.io_configmapsyncs.yaml") },
		before:  "serving []", want: "starting again: the API server now serves ConfigMapSync",
	}, {
		name:  "the SecretSync CRD installed after a start in auto",
		asked: bare.Config,
		options: func(o *replicator.Options) {
			o.Secrets, o.SecretSync, o.ConfigMapSync = true, replicator.SyncAuto, replicator.SyncDisabled
		},
		change: func(t *testing.T, _ func(string) string) { installCRD(t, bare, "cmsync.io_secretsyncs.yaml") },
		before: "serving []", want: "starting again: the API server now serves SecretSync",
	}}
}

// run arranges the row's namespaces (with random names), starts cmsync, and checks
// what it reports before and after the change.
func (row startRow) run(t *testing.T, bare *controlplane.Env, admin client.Client) {
	suffix := randomSuffix()
	ns := func(name string) string { return "start-" + name + "-" + suffix }
	listed := make([]string, 0, len(row.listed))
	for _, name := range row.listed {
		listed = append(listed, ns(name))
		if name != "later" || row.roleOff {
			makeNamespace(t, admin, ns(name))
		}
		if name != "later" {
			grant(t, admin, ns(name), configMapsRule)
		}
	}
	short := strings.NewReplacer(ns("served"), "served", ns("later"), "later")
	events := startReporting(t, bare, row.asked, listed, row.options)
	if row.before != "" {
		expectReport(t, events, short, 30*time.Second, row.before)
	}
	expectReport(t, events, short, startupRecheck+5*time.Second, "")
	row.change(t, ns)
	expectReport(t, events, short, 90*time.Second, row.want)
}

var (
	namespacesRule = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}}
	configMapsRule = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}}
)

// startReporting starts cmsync against env as internal/startup does but for the exec,
// its scope's checks asking for asked's identity, with the options as change leaves
// them. It reports on the channel "serving <namespaces>" once the caches have listed
// (the namespaces served in scoped mode), then "starting again: <reason>".
func startReporting(t *testing.T, env *controlplane.Env, asked *rest.Config, listed []string, change func(*replicator.Options)) <-chan string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(asked)
	must(t, err)
	var flags replicator.Options
	change(&flags)
	events := make(chan string, 2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		scope, err := startup.ServedScope(ctx, cs, listed, flags.Secrets)
		if err != nil {
			return // the test is over
		}
		mgr, served, err := setupWith(t, env, func(o *replicator.Options) { change(o); o.Policy.Scope = scope.Served })
		if err == nil {
			err = startup.AddStartAgain(mgr, cs, scope, served, func(reason string) { events <- "starting again: " + reason })
		}
		if err != nil {
			t.Errorf("setting up: %v", err)
			return
		}
		go func() {
			if served.CachesSynced(ctx) {
				events <- fmt.Sprintf("serving %v", scope.Served)
			}
		}()
		_ = mgr.Start(ctx)
	}()
	return events
}

// expectReport fails unless the start reports want (namespaces shortened) within
// timeout; with want "", unless it reports nothing.
func expectReport(t *testing.T, events <-chan string, short *strings.Replacer, timeout time.Duration, want string) {
	t.Helper()
	select {
	case got := <-events:
		if got = short.Replace(got); got != want {
			t.Fatalf("the start reported %q, want %q", got, want)
		}
	case <-time.After(timeout):
		if want != "" {
			t.Fatalf("the start did not report %q within %s", want, timeout)
		}
	}
}

// makeNamespace creates the namespace name.
func makeNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	must(t, c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
}

// grant grants rule to the user cmsync-scoped in namespace, or cluster-wide when
// namespace is "".
func grant(t *testing.T, c client.Client, namespace string, rule rbacv1.PolicyRule) {
	t.Helper()
	ctx, meta := context.Background(), metav1.ObjectMeta{Name: "cmsync-scoped", Namespace: namespace}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "cmsync-scoped"}}
	if namespace == "" {
		must(t, c.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{rule}}))
		must(t, c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: meta.Name}}))
		return
	}
	must(t, c.Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{rule}}))
	must(t, c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: meta.Name}}))
}

// installCRD installs one of deploy/crds into env.
func installCRD(t *testing.T, env *controlplane.Env, file string) {
	t.Helper()
	_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{"../../deploy/crds/" + file}})
	must(t, err)
}
