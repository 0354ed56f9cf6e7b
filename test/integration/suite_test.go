// Package integration runs cmsync's reconciler in-process against a real kube-apiserver
// and etcd. The controller reads through its own caches; every assertion reads through
// a separate, uncached client.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
	"github.com/cmsync/cmsync/internal/testsupport/testkit"
	"github.com/cmsync/cmsync/replicator"
)

var (
	restConfig   *rest.Config
	k8s          client.Client     // uncached, for arranging and asserting
	controlPlane *controlplane.Env // to add users (startAuditedController)
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(testLogger(os.Stderr))
	audit, err := os.MkdirTemp("", "cmsync-integration-audit-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	auditLog = filepath.Join(audit, "audit.log")
	env, err := controlplane.StartWith(controlplane.Options{
		CRDDirs: []string{"../../deploy/crds"}, AuditLog: auditLog, AuditAllFrom: []string{auditedUser},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	restConfig, controlPlane = env.Config, env
	k8s, err = client.New(restConfig, client.Options{Scheme: newScheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	_ = os.RemoveAll(audit)
	os.Exit(code)
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}

// controllerUnderTest is one running instance of cmsync's controller.
type controllerUnderTest struct {
	writes atomic.Int64 // create, update, patch and delete requests it sent
	// secretRequests counts its requests about Secrets, of any verb.
	secretRequests atomic.Int64
	// objectReads are the paths of its GETs of one whole ConfigMap or Secret: reads of
	// a replica's content past the replica cache. Metadata-only GETs (the engine's look
	// at a replica after its update met a 409) are not counted.
	objectReads []string
	// kindRequests are the method and path of every request about ConfigMaps or Secrets.
	kindRequests []string
	// requests are the method and path of every request.
	requests []string
	mu       sync.Mutex
	paths    []string // the last write requests, to explain a failure
	// written counts every write request, by method and path ("PATCH /apis/…/status").
	written map[string]int
	// trickle, once set, makes its replica watch hand over what the API server sends
	// a few bytes at a time: the events of a pass's writes reach the replica cache one
	// by one, over a second or more, as from a busy API server's.
	trickle atomic.Bool
	cancel  context.CancelFunc
	done    chan struct{}
	// Metrics is the registry holding the controller's cmsync_* metrics.
	Metrics *prometheus.Registry
	// Served is what replicator.Setup said it set up.
	Served replicator.Served
	// refused, when set, picks the requests the controller's API server answers with
	// 403 Forbidden, as it does those RBAC does not allow.
	refused atomic.Pointer[func(*http.Request) bool]
	// slowed, when set, picks the requests whose answers reach the controller late:
	// after the API server has sent their watch events.
	slowed atomic.Pointer[func(*http.Request) bool]
	logs   lockedBuffer // what the controller logged (errors and warnings, unless CMSYNC_TEST_LOG)
}

// Refuse makes the API server answer the controller's requests that match with 403
// Forbidden, until Allow.
func (c *controllerUnderTest) Refuse(match func(*http.Request) bool) { c.refused.Store(&match) }

// Allow ends Refuse.
func (c *controllerUnderTest) Allow() { c.refused.Store(nil) }

// SlowAnswers makes the answers to the controller's requests that match reach it
// slowAnswer late, from now on: the watch events of those writes arrive first.
func (c *controllerUnderTest) SlowAnswers(match func(*http.Request) bool) { c.slowed.Store(&match) }

// slowAnswer is how late SlowAnswers hands over an answer.
const slowAnswer = 300 * time.Millisecond

// Logs returns what the controller has logged.
func (c *controllerUnderTest) Logs() string { return c.logs.String() }

// forbidden is the API server's answer to a list RBAC does not allow, in its words
// (apimachinery's NewForbidden).
func forbidden(req *http.Request) *http.Response {
	status := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "",
		errors.New(`User "system:serviceaccount:cmsync:cmsync" cannot list resource "configmaps" in API group "" in the namespace`)).ErrStatus
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	body, _ := json.Marshal(status)
	return &http.Response{
		StatusCode: http.StatusForbidden, Status: "403 Forbidden", Request: req,
		Header: http.Header{"Content-Type": []string{"application/json"}},
		Body:   io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
	}
}

// lockedBuffer is a bytes.Buffer that several goroutines may write.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// isObjectRead reports whether path names one ConfigMap or Secret (not a list or watch
// of them).
func isObjectRead(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	return len(parts) >= 2 && (parts[len(parts)-2] == "configmaps" || parts[len(parts)-2] == "secrets")
}

// ObjectReadsIn returns the GETs of one ConfigMap or Secret the controller has made in
// these namespaces.
func (c *controllerUnderTest) ObjectReadsIn(namespaces ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var reads []string
	for _, path := range c.objectReads {
		for _, ns := range namespaces {
			if strings.Contains(path, "/namespaces/"+ns+"/") {
				reads = append(reads, path)
			}
		}
	}
	return reads
}

// KindRequests returns the method and path of every request the controller has made
// about ConfigMaps or Secrets.
func (c *controllerUnderTest) KindRequests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.kindRequests)
}

// RequestsAbout returns the method and path of every request the controller has made
// about the resource (a path segment: "limitranges").
func (c *controllerUnderTest) RequestsAbout(resource string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var about []string
	for _, r := range c.requests {
		if slices.Contains(strings.Split(r, "/"), resource) {
			about = append(about, r)
		}
	}
	return about
}

// Writes returns how many write requests the controller has made.
func (c *controllerUnderTest) Writes() int64 { return c.writes.Load() }

// LastWrites describes the most recent write requests.
func (c *controllerUnderTest) LastWrites() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.paths, "\n")
}

// Stop stops the controller and waits until it has.
func (c *controllerUnderTest) Stop() {
	c.cancel()
	<-c.done
}

type controllerOption func(*replicator.Options)

// withSecrets runs the controller with --secrets=enabled.
func withSecrets() controllerOption {
	return func(o *replicator.Options) { o.Secrets = true }
}

func withPolicy(p desired.Policy) controllerOption {
	return func(o *replicator.Options) { o.Policy = p }
}

// defaultPolicy is the policy of the binary's default flags.
func defaultPolicy() desired.Policy {
	return desired.Policy{ExcludeNamespaces: []string{"kube-system", "kube-public", "kube-node-lease"}, SourceNamespaces: []string{"*"}}
}

// startController runs cmsync's controller as the binary wires it, with a client that
// counts its write requests, until the test ends.
func startController(t *testing.T, opts ...controllerOption) *controllerUnderTest {
	t.Helper()
	return startControllerBehind(t, 0, opts...)
}

// startControllerBehind is startController with the controller's watches of sources
// and ConfigMapSyncs reading each chunk of their streams lag late, so that its caches
// of the objects it writes status onto trail the API server as a busy one's do; its
// watches of replicas and namespaces are not delayed.
func startControllerBehind(t *testing.T, lag time.Duration, opts ...controllerOption) *controllerUnderTest {
	t.Helper()
	return startControllerAs(t, restConfig, lag, opts...)
}

// startControllerAs is startControllerBehind with the identity of identity's config.
func startControllerAs(t *testing.T, identity *rest.Config, lag time.Duration, opts ...controllerOption) *controllerUnderTest {
	t.Helper()
	c := &controllerUnderTest{done: make(chan struct{}), Metrics: prometheus.NewRegistry(), written: map[string]int{}}
	cfg := rest.CopyConfig(identity)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if strings.Contains(req.URL.Path, "/secrets") {
				c.secretRequests.Add(1)
			}
			c.mu.Lock()
			c.requests = append(c.requests, req.Method+" "+req.URL.Path)
			c.mu.Unlock()
			if segments := strings.Split(req.URL.Path, "/"); slices.Contains(segments, "configmaps") || slices.Contains(segments, "secrets") {
				c.mu.Lock()
				c.kindRequests = append(c.kindRequests, req.Method+" "+req.URL.Path)
				c.mu.Unlock()
			}
			if req.Method == http.MethodGet && isObjectRead(req.URL.Path) && !strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadata") {
				c.mu.Lock()
				c.objectReads = append(c.objectReads, req.URL.Path)
				c.mu.Unlock()
			}
			if req.Method != http.MethodGet {
				c.writes.Add(1)
				c.mu.Lock()
				c.paths = append(c.paths[max(0, len(c.paths)-20):], req.Method+" "+req.URL.Path)
				c.written[req.Method+" "+req.URL.Path]++
				c.mu.Unlock()
			}
			if refused := c.refused.Load(); refused != nil && (*refused)(req) {
				return forbidden(req), nil
			}
			resp, err := rt.RoundTrip(req)
			if slowed := c.slowed.Load(); slowed != nil && (*slowed)(req) {
				time.Sleep(slowAnswer)
			}
			if err == nil && lag > 0 && isSourceWatch(req) {
				resp.Body = lateReader{ReadCloser: resp.Body, lag: lag}
			}
			if err == nil && isReplicaWatch(req) {
				resp.Body = tricklingReader{ReadCloser: resp.Body, on: &c.trickle}
			}
			return resp, err
		})
	}
	o := replicator.Options{
		Policy:          defaultPolicy(),
		Writers:         16,
		ConflictRecheck: time.Second,
		Controller:      controller.Options{MaxConcurrentReconciles: 4},
		Registerer:      c.Metrics,
		ConfigMapSync:   replicator.SyncAuto,
	}
	for _, opt := range opts {
		opt(&o)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 newScheme(),
		Logger:                 testLogger(io.MultiWriter(os.Stderr, &c.logs)),
		Cache:                  replicator.ManagerCacheOptions(o),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr(true)},
	})
	if err != nil {
		t.Fatalf("creating manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	if c.Served, err = replicator.Setup(ctx, mgr, o); err != nil {
		t.Fatalf("setting up controller: %v", err)
	}
	go func() {
		defer close(c.done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager stopped: %v", err)
		}
	}()
	t.Cleanup(c.Stop)
	return c
}

// isSourceWatch reports whether req is a watch of source ConfigMaps (the watch the
// source cache lists and follows through) or of ConfigMapSyncs.
func isSourceWatch(req *http.Request) bool {
	q := req.URL.Query()
	if q.Get("watch") != "true" {
		return false
	}
	return strings.HasSuffix(req.URL.Path, "/configmapsyncs") ||
		strings.HasSuffix(req.URL.Path, "/configmaps") && strings.Contains(q.Get("labelSelector"), v1alpha1.ReplicateLabel)
}

// lateReader hands over what a watch sends after a quiet spell lag late: an event a
// test makes reaches the cache behind the events around it. A burst already on its way
// is not slowed read by read: client-go streams a watch's initial list (every source
// the earlier tests left in the cluster) through the same body, and a lag on every read
// held that list back for longer than a test waits.
type lateReader struct {
	io.ReadCloser
	lag time.Duration
}

// quietSpell is how long a read must wait for data for what it gets to count as news
// rather than the rest of a burst.
const quietSpell = 20 * time.Millisecond

func (r lateReader) Read(p []byte) (int, error) {
	asked := time.Now()
	n, err := r.ReadCloser.Read(p)
	if time.Since(asked) > quietSpell {
		time.Sleep(r.lag)
	}
	return n, err
}

// isReplicaWatch reports whether req is a watch of the replica cache (of the objects
// labelled managed-by cmsync).
func isReplicaWatch(req *http.Request) bool {
	q := req.URL.Query()
	return q.Get("watch") == "true" && strings.Contains(q.Get("labelSelector"), v1alpha1.ManagedByLabel)
}

// tricklingReader hands over a watch's stream at most trickleBytes per read, a
// trickleGap apart, while on is set.
type tricklingReader struct {
	io.ReadCloser
	on *atomic.Bool
}

const (
	trickleBytes = 256
	trickleGap   = 5 * time.Millisecond
)

func (r tricklingReader) Read(p []byte) (int, error) {
	if !r.on.Load() {
		return r.ReadCloser.Read(p)
	}
	time.Sleep(trickleGap)
	return r.ReadCloser.Read(p[:min(len(p), trickleBytes)])
}

// TrickleReplicaEvents makes the controller's replica watch slow from now on.
func (c *controllerUnderTest) TrickleReplicaEvents() { c.trickle.Store(true) }

// WritesIn counts the controller's write requests of method into these namespaces.
func (c *controllerUnderTest) WritesIn(method string, namespaces ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, ns := range namespaces {
		for request, count := range c.written {
			if m, path, _ := strings.Cut(request, " "); m == method && namespaceOf(path) == ns {
				n += count
			}
		}
	}
	return n
}

// WritesTo counts the write requests of a method to one path.
func (c *controllerUnderTest) WritesTo(method, path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.written[method+" "+path]
}

// namespaceOf is the namespace a request's path names, or "".
func namespaceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, part := range parts[:max(0, len(parts)-1)] {
		if part == "namespaces" {
			return parts[i+1]
		}
	}
	return ""
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func ptr[T any](v T) *T { return &v }

// testLogger logs to w at zapLevel's level, in zap's development format.
func testLogger(w io.Writer) logr.Logger {
	return zap.New(zap.UseDevMode(true), zap.WriteTo(w), zap.Level(zapcore.Level(zapLevel())))
}

func zapLevel() int8 {
	if os.Getenv("CMSYNC_TEST_LOG") != "" {
		return -1
	}
	return 1 // warnings and errors only, unless asked
}

// --- arranging ---

// newNamespace creates a namespace with a random name starting with prefix.
func newNamespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + randomSuffix(), Labels: labels}}
	must(t, k8s.Create(context.Background(), ns))
	return ns.Name
}

// newGroup creates n namespaces labelled with a new group=<value> and returns the
// value and the namespaces' names.
func newGroup(t *testing.T, prefix string, n int) (group string, namespaces []string) {
	t.Helper()
	group = prefix + randomSuffix()
	for range n {
		namespaces = append(namespaces, newNamespace(t, "dst", map[string]string{"group": group}))
	}
	return group, namespaces
}

// namespaceSet creates namespaces "<base>-<name>" for each name and returns base.
func namespaceSet(t *testing.T, names ...string) string {
	t.Helper()
	base := "t" + randomSuffix()
	for _, n := range names {
		must(t, k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: base + "-" + n}}))
	}
	return base
}

// newSource creates a labelled source ConfigMap.
func newSource(t *testing.T, namespace, name string, annotations, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name,
			Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: annotations,
		},
		Data: data,
	}
	must(t, k8s.Create(context.Background(), cm))
	return cm
}

// update re-reads obj, applies change and writes it back, retrying on conflicts.
func update[T client.Object](t *testing.T, obj T, change func(T)) {
	t.Helper()
	eventually(t, 10*time.Second, "update "+obj.GetName(), func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return k8s.Update(context.Background(), obj)
	})
}

// --- observing ---

func getConfigMap(namespace, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, cm)
	return cm, err
}

const timeout = 20 * time.Second

// waitForSourceStatus waits until the status annotations of a source of either kind
// say state and synced ("" for any), and returns the source as the server has it.
func waitForSourceStatus[T client.Object](t *testing.T, src T, state, synced string) T {
	t.Helper()
	var got T
	eventually(t, timeout, "status of "+src.GetNamespace()+"/"+src.GetName(), func() error {
		got = newLike(src)
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(src), got); err != nil {
			return err
		}
		a := got.GetAnnotations()
		if a[v1alpha1.StatusAnnotation] != state || synced != "" && a[v1alpha1.SyncedAnnotation] != synced {
			return fmt.Errorf("status %q synced %q message %q, want %q %q", a[v1alpha1.StatusAnnotation], a[v1alpha1.SyncedAnnotation],
				a[v1alpha1.MessageAnnotation], state, synced)
		}
		return nil
	})
	return got
}

// newLike returns a new, empty object of obj's type: a read into it holds only what the
// server sent.
func newLike[T client.Object](obj T) T {
	return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
}

// waitForStatus waits until the source's status annotation is state and returns it.
func waitForStatus(t *testing.T, src *corev1.ConfigMap, state string) *corev1.ConfigMap {
	t.Helper()
	return waitForSourceStatus(t, src, state, "")
}

// waitForSynced waits until the source is Synced with the given "n/n".
func waitForSynced(t *testing.T, src *corev1.ConfigMap, synced string) *corev1.ConfigMap {
	t.Helper()
	return waitForSourceStatus(t, src, v1alpha1.StatusSynced, synced)
}

// replicaNamespaces lists the namespaces holding a replica of src made for its
// annotations (not for a ConfigMapSync), by the API.
func replicaNamespaces(t *testing.T, src *corev1.ConfigMap) []string {
	t.Helper()
	var list corev1.ConfigMapList
	must(t, k8s.List(context.Background(), &list, client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}))
	var namespaces []string
	for _, cm := range list.Items {
		if cm.Name == src.Name && cm.Annotations[v1alpha1.SourceAnnotation] == src.Namespace+"/"+src.Name && len(cm.OwnerReferences) == 0 {
			namespaces = append(namespaces, cm.Namespace)
		}
	}
	return namespaces
}

// waitForReplicasIn waits until the replicas of src are in exactly the namespaces given.
func waitForReplicasIn(t *testing.T, src *corev1.ConfigMap, want ...string) {
	t.Helper()
	eventually(t, timeout, "replicas of "+src.Name, func() error {
		got := replicaNamespaces(t, src)
		if !sameSet(got, want) {
			return fmt.Errorf("replicas in %v, want %v", got, want)
		}
		return nil
	})
}

// eventsFor lists the Events recorded about an object with the given reason.
func eventsFor(t *testing.T, obj client.Object, reason string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	must(t, k8s.List(context.Background(), &list, client.InNamespace(obj.GetNamespace())))
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == obj.GetName() && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// waitForEvent waits for an Event with reason whose note contains fragment.
func waitForEvent(t *testing.T, obj client.Object, reason, fragment string) {
	t.Helper()
	eventually(t, timeout, "event "+reason, func() error {
		for _, e := range eventsFor(t, obj, reason) {
			if strings.Contains(e.Note, fragment) {
				return nil
			}
		}
		return fmt.Errorf("no %s event mentioning %q on %s", reason, fragment, obj.GetName())
	})
}

// The shared helpers, under the names these tests use.
var (
	eventually   = testkit.Eventually
	consistently = testkit.Consistently
	sameSet      = testkit.SameSet
	randomSuffix = testkit.RandomSuffix
	must         = testkit.Must
)

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// metricValue reads one sample of a gauge or the count of a histogram, selected by
// name and, when given, the value of its "state" label.
func metricValue(t *testing.T, reg *prometheus.Registry, name, state string) float64 {
	t.Helper()
	return kindMetricValue(t, reg, name, "ConfigMap", state)
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// kindMetricValue reads a cmsync metric of one kind (and state, unless empty).
func kindMetricValue(t *testing.T, reg *prometheus.Registry, name, kind, state string) float64 {
	t.Helper()
	families, err := reg.Gather()
	must(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if state != "" && labelValue(m, "state") != state || labelValue(m, "kind") != "" && labelValue(m, "kind") != kind {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s{kind=%q,state=%q} not found", name, kind, state)
	return 0
}

// notSynced reads cmsync_sources_not_synced{kind,reason}.
func notSynced(t *testing.T, reg *prometheus.Registry, kind, reason string) float64 {
	t.Helper()
	families, err := reg.Gather()
	must(t, err)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetName() == "cmsync_sources_not_synced" && labelValue(m, "kind") == kind && labelValue(m, "reason") == reason {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("cmsync_sources_not_synced{kind=%q,reason=%q} not found", kind, reason)
	return 0
}

// newNamespaceNamed creates a namespace with exactly this name.
func newNamespaceNamed(t *testing.T, name string) {
	t.Helper()
	must(t, k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
}
