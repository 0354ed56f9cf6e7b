//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// These scenarios need cmsync running as the chart's Pods on a real cluster (make
// kind-e2e).
func skipUnlessInCluster(t *testing.T) {
	if !harness.ExistingCluster {
		t.Skip("needs cmsync as an in-cluster Pod (make kind-e2e)")
	}
}

var podSelector = client.MatchingLabels{"app.kubernetes.io/name": "cmsync", "app.kubernetes.io/instance": "cmsync"}

// The chart's Pod runs under its security settings — non-root 65532, read-only root
// filesystem, no capabilities, no privilege escalation, RuntimeDefault seccomp — and
// becomes Ready through the probes the kubelet runs against it.
func TestPodRunsHardened(t *testing.T) {
	skipUnlessInCluster(t)
	pods := readyPods(t, 1)
	for _, pod := range pods {
		psc, c := pod.Spec.SecurityContext, pod.Spec.Containers[0]
		sc := c.SecurityContext
		switch {
		case psc == nil || sc == nil:
			t.Fatalf("pod %s has no security context", pod.Name)
		case psc.RunAsUser == nil || *psc.RunAsUser != 65532 || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot:
			t.Errorf("pod %s: runAsUser %v runAsNonRoot %v", pod.Name, psc.RunAsUser, psc.RunAsNonRoot)
		case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
			t.Errorf("pod %s: seccomp %v", pod.Name, psc.SeccompProfile)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("pod %s: root filesystem writable", pod.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("pod %s: privilege escalation allowed", pod.Name)
		case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0:
			t.Errorf("pod %s: capabilities %v", pod.Name, sc.Capabilities)
		case c.LivenessProbe == nil || c.ReadinessProbe == nil:
			t.Errorf("pod %s: probes missing", pod.Name)
		}
		for _, s := range pod.Status.ContainerStatuses {
			if s.RestartCount > 0 {
				t.Errorf("pod %s: container restarted %d times", pod.Name, s.RestartCount)
			}
		}
	}
	// The kubelet's own count of the probes it ran against the container.
	eventually(t, 60*time.Second, "kubelet probed liveness and readiness successfully", func() error {
		raw, err := harness.Clientset.CoreV1().
			RESTClient().
			Get().
			AbsPath("/api/v1/nodes", pods[0].Spec.NodeName, "proxy/metrics/probes").
			DoRaw(context.Background())
		if err != nil {
			return err
		}
		for _, probe := range []string{"Liveness", "Readiness"} {
			if !probedSuccessfully(string(raw), probe, pods[0].Name) {
				return fmt.Errorf("no successful %s probe of %s yet", probe, pods[0].Name)
			}
		}
		return nil
	})
}

func probedSuccessfully(metrics, probe, pod string) bool {
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "prober_probe_total{") && strings.Contains(line, `probe_type="`+probe+`"`) &&
			strings.Contains(line, `pod="`+pod+`"`) && strings.Contains(line, `result="successful"`) && !strings.HasSuffix(line, " 0") {
			return true
		}
	}
	return false
}

// `kubectl delete pod` of the leader: another Pod takes the lease, and changes made
// meanwhile reach every replica, with nothing left over.
func TestLeaderPodDeleted(t *testing.T) {
	skipUnlessInCluster(t)
	ctx := context.Background()
	src := harness.NewNamespace(t, "lead-src", nil)
	group := "lead" + randomSuffix()
	targets := make([]string, 0, 10)
	for range 10 {
		targets = append(targets, harness.NewNamespace(t, group, nil))
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "led",
		Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
		Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: group + "-*"}},
		Data: map[string]string{"v": "1"}}
	must(t, harness.K8s.Create(ctx, cm))
	harness.WaitForReplicas(t, src, "led", 60*time.Second, targets...)

	leader := leaderPod()
	t.Logf("deleting the leader pod %s", leader)
	must(t, harness.Clientset.CoreV1().Pods(harness.ReleaseNamespace).Delete(ctx, leader, metav1.DeleteOptions{}))
	must(t, harness.K8s.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"v":"2"}}`))))
	harness.WithoutProtection(t, func() {
		must(t, harness.K8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: targets[0], Name: "led"}}))
	})

	eventually(t, 120*time.Second, "another pod leads", func() error {
		if now := leaderPod(); now == leader || now == "" {
			return fmt.Errorf("lease still held by %q", now)
		}
		return nil
	})
	harness.WaitForValue(t, 60*time.Second, "led", "v", "2", targets...)
	harness.WaitForAnnotation(t, src, "led", v1alpha1.StatusAnnotation, v1alpha1.StatusSynced)
	// The Deployment replaced the deleted Pod: as many Ready Pods as it asks for, none of
	// them the deleted one.
	var deployment appsv1.Deployment
	must(t, harness.K8s.Get(ctx, client.ObjectKey{Namespace: harness.ReleaseNamespace, Name: "cmsync"}, &deployment))
	for _, p := range readyPods(t, int(*deployment.Spec.Replicas)) {
		if p.Name == leader {
			t.Errorf("the deleted pod %s is still counted Ready", leader)
		}
	}
	must(t, harness.K8s.Delete(ctx, cm))
	harness.WaitForReplicas(t, src, "led", 60*time.Second)
}

// leaderPod names the Pod holding the leader election lease (holder identities are
// "<pod name>_<uuid>"), or "".
func leaderPod() string {
	var lease coordinationv1.Lease
	if err := harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: harness.ReleaseNamespace, Name: "cmsync.io"}, &lease); err != nil {
		return ""
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	name, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return name
}

// readyPods waits for at least min Ready cmsync Pods and returns them.
func readyPods(t *testing.T, min int) []corev1.Pod {
	t.Helper()
	var ready []corev1.Pod
	eventually(t, 120*time.Second, "cmsync pods Ready", func() error {
		var pods corev1.PodList
		if err := harness.K8s.List(context.Background(), &pods, client.InNamespace(harness.ReleaseNamespace), podSelector); err != nil {
			return err
		}
		ready = ready[:0]
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					ready = append(ready, p)
				}
			}
		}
		if len(ready) < min {
			return fmt.Errorf("%d of %d pods Ready: %s", len(ready), len(pods.Items), describePods(pods.Items))
		}
		return nil
	})
	return ready
}

// describePods says, for a failure's message, where each Pod stands: its phase, whether
// it is being deleted, its node and each container's state.
func describePods(pods []corev1.Pod) string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		line := fmt.Sprintf("%s %s on %q deleting=%t", p.Name, p.Status.Phase, p.Spec.NodeName, p.DeletionTimestamp != nil)
		for _, c := range p.Status.ContainerStatuses {
			line += fmt.Sprintf(" [%s ready=%t restarts=%d %+v]", c.Name, c.Ready, c.RestartCount, c.State)
		}
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				line += fmt.Sprintf(" %s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		out = append(out, line)
	}
	return strings.Join(out, "; ")
}

// On every node of the cluster (kind-e2e runs two), a Pod in a namespace of its own
// mounts the replicas of a kubernetes.io/tls Secret and of a ConfigMap: its container
// reads the source's certificate and settings, and after both sources are renewed, the
// new ones. The kubelet of each node reads the replicas, never the sources, so this is
// the whole path a team's ingress depends on, wherever its Pods run.
func TestPodsMountReplicasOnEveryNode(t *testing.T) {
	skipUnlessInCluster(t)
	ctx := context.Background()
	nodes := readyNodes(t)
	src := harness.NewNamespace(t, "issuer", nil)
	dsts := make([]string, len(nodes))
	for i := range nodes {
		dsts[i] = harness.NewNamespace(t, "mount", nil)
	}
	targets := map[string]string{v1alpha1.TargetNamespacesAnnotation: strings.Join(dsts, ",")}
	replicate := map[string]string{v1alpha1.ReplicateLabel: "true"}
	first := "-----BEGIN CERTIFICATE-----\nfirst-issue-" + randomSuffix() + "\n-----END CERTIFICATE-----\n"
	renewed := "-----BEGIN CERTIFICATE-----\nrenewed-" + randomSuffix() + "\n-----END CERTIFICATE-----\n"
	firstSettings, renewedSettings := "endpoint=first-"+randomSuffix(), "endpoint=renewed-"+randomSuffix()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "wildcard-tls", Labels: replicate, Annotations: targets},
		Type:       corev1.SecretTypeTLS,
		StringData: map[string]string{corev1.TLSCertKey: first, corev1.TLSPrivateKeyKey: "key"},
	}
	settings := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "settings", Labels: replicate, Annotations: targets},
		Data:       map[string]string{"settings": firstSettings},
	}
	must(t, harness.K8s.Create(ctx, secret))
	must(t, harness.K8s.Create(ctx, settings))
	waitForSecretValue(t, "wildcard-tls", corev1.TLSCertKey, first, dsts...)
	waitForData(t, "settings", map[string]string{"settings": firstSettings}, dsts...)

	for i, node := range nodes {
		must(t, harness.K8s.Create(ctx, readerPod(dsts[i], node)))
	}
	for _, dst := range dsts {
		waitForLog(t, dst, first, 90*time.Second)
		waitForLog(t, dst, firstSettings, 30*time.Second)
	}

	must(t, harness.K8s.Patch(ctx, secret, client.RawPatch(types.MergePatchType,
		[]byte(`{"stringData":{"`+corev1.TLSCertKey+`":`+fmt.Sprintf("%q", renewed)+`}}`))))
	must(t, harness.K8s.Patch(ctx, settings, client.RawPatch(types.MergePatchType,
		[]byte(`{"data":{"settings":`+fmt.Sprintf("%q", renewedSettings)+`}}`))))
	waitForSecretValue(t, "wildcard-tls", corev1.TLSCertKey, renewed, dsts...)
	waitForData(t, "settings", map[string]string{"settings": renewedSettings}, dsts...)
	// The kubelet refreshes Secret and ConfigMap volumes on its Pod sync (every minute
	// by default).
	for _, dst := range dsts {
		waitForLog(t, dst, renewed, 3*time.Minute)
		waitForLog(t, dst, renewedSettings, time.Minute)
	}
}

// readyNodes returns the names of the cluster's Ready nodes.
func readyNodes(t *testing.T) []string {
	t.Helper()
	var nodes corev1.NodeList
	must(t, harness.K8s.List(context.Background(), &nodes))
	var names []string
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				names = append(names, n.Name)
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("no Ready node")
	}
	return names
}

// readerPod runs printfile on node, hardened as the chart's Pod is, over the replicas
// wildcard-tls and settings mounted in namespace. It tolerates the control plane's
// taint, so that it runs on every node.
func readerPod(namespace, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "reader"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Tolerations: []corev1.Toleration{
				{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: harness.Ptr(true), RunAsUser: harness.Ptr(int64(65532)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "reader", Image: "localhost/cmsync-node/printfile:1", ImagePullPolicy: corev1.PullNever,
				Args: []string{"/tls/" + corev1.TLSCertKey, "/settings/settings"},
				VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/tls", ReadOnly: true},
					{Name: "settings", MountPath: "/settings", ReadOnly: true}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: harness.Ptr(false), ReadOnlyRootFilesystem: harness.Ptr(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
			Volumes: []corev1.Volume{
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "wildcard-tls"}}},
				{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
			},
		},
	}
}

// waitForLog waits until the log of the reader Pod in namespace contains text.
func waitForLog(t *testing.T, namespace, text string, timeout time.Duration) {
	const pod = "reader"
	t.Helper()
	eventually(t, timeout, "log of "+namespace+"/"+pod+" shows "+text, func() error {
		raw, err := harness.Clientset.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(context.Background())
		if err != nil {
			return err
		}
		if !strings.Contains(string(raw), text) {
			return fmt.Errorf("not yet; the log ends %q", string(raw[max(0, len(raw)-200):]))
		}
		return nil
	})
}
