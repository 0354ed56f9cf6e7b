//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/test/harness"
)

// networkPolicyEnforcement is what the kind suite (hack/kind-e2e.sh) says of its Pod
// network: "enforced" where it enforces NetworkPolicy (kind's published node image:
// kindnetd with kube-network-policies), otherwise why it does not.
var networkPolicyEnforcement = os.Getenv("CMSYNC_KIND_NETWORK_POLICY")

// A default-deny NetworkPolicy that an ObjectSync replicates into a namespace keeps a
// Pod there from being reached by a Pod of another namespace, which reached it before;
// once the ObjectSync is deleted, its replica goes and the Pod is reached again. Where
// the Pod network does not enforce NetworkPolicy, the replica is checked and the test
// says in its log that enforcement was not shown.
func TestKindReplicatedDefaultDenyKeepsAPodFromBeingReached(t *testing.T) {
	skipUnlessInCluster(t)
	ctx := context.Background()
	platform, served, clients := harness.NewNamespace(t, "np-platform", nil), harness.NewNamespace(t, "np-served", nil),
		harness.NewNamespace(t, "np-clients", nil)
	node := readyNodes(t)[0]
	server := startProbePod(t, served, "server", node, "serve", ":8080")
	startProbePod(t, clients, "client", node, "probe", "http://"+server.Status.PodIP+":8080/")
	waitForProbe(t, clients, "reached")

	deny := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "default-deny"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	must(t, harness.K8s.Create(ctx, deny))
	sync := &v1alpha1.ObjectSync{
		ObjectMeta: metav1.ObjectMeta{Name: "default-deny-" + randomSuffix()},
		Spec: v1alpha1.ObjectSyncSpec{
			Source:               v1alpha1.ObjectSource{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: platform, Name: deny.Name},
			DestinationNamespace: served,
		},
	}
	must(t, harness.K8s.Create(ctx, sync))
	t.Cleanup(func() { _ = harness.K8s.Delete(context.Background(), sync) })
	waitForPolicyReplica(t, sync, served, deny.Spec)

	if networkPolicyEnforcement != "enforced" {
		why := networkPolicyEnforcement
		if why == "" {
			why = "the run does not say whether its Pod network enforces NetworkPolicy: CMSYNC_KIND_NETWORK_POLICY is unset"
		}
		t.Logf("ENFORCEMENT NOT SHOWN: the default-deny NetworkPolicy's replica is in %s, but its effect was not checked: %s. "+
			"The client's probe after the replica: %s", served, why, lastProbe(t, clients))
		return
	}
	waitForProbe(t, clients, "not reached")
	consistently(t, 5*time.Second, "the server stays unreached", func() error {
		if last := lastProbe(t, clients); !strings.HasPrefix(last, "not reached") {
			return fmt.Errorf("the client's probe: %s", last)
		}
		return nil
	})

	must(t, harness.K8s.Delete(ctx, sync))
	eventually(t, 60*time.Second, "the replica gone with its ObjectSync", func() error {
		err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: served, Name: deny.Name}, &networkingv1.NetworkPolicy{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the replica: %v", err)
		}
		return nil
	})
	waitForProbe(t, clients, "reached")
}

// startProbePod runs netprobe (hack/netprobe) with args on node, hardened as the
// chart's Pod is, and returns it once it runs with an address.
func startProbePod(t *testing.T, namespace, name, node string, args ...string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Tolerations: []corev1.Toleration{
				{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: harness.Ptr(true), RunAsUser: harness.Ptr(int64(65532)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "netprobe", Image: "localhost/cmsync-node/netprobe:1", ImagePullPolicy: corev1.PullNever, Args: args,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: harness.Ptr(false), ReadOnlyRootFilesystem: harness.Ptr(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	// The namespace's default ServiceAccount, which the Pod needs, comes a moment after
	// the namespace.
	eventually(t, 30*time.Second, "create Pod "+namespace+"/"+name, func() error { return harness.K8s.Create(ctx, pod) })
	eventually(t, 90*time.Second, "Pod "+namespace+"/"+name+" running", func() error {
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
			return fmt.Errorf("phase %s, address %q", pod.Status.Phase, pod.Status.PodIP)
		}
		return nil
	})
	return pod
}

// lastProbe is the last line the client Pod of namespace printed.
func lastProbe(t *testing.T, namespace string) string {
	t.Helper()
	raw, err := harness.Clientset.CoreV1().Pods(namespace).GetLogs("client", &corev1.PodLogOptions{TailLines: harness.Ptr(int64(1))}).
		DoRaw(context.Background())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return strings.TrimSpace(string(raw))
}

// waitForProbe waits until the client Pod of namespace reports result ("reached", "not
// reached") on its last probe.
func waitForProbe(t *testing.T, namespace, result string) {
	t.Helper()
	eventually(t, 90*time.Second, "the client's probe says "+result, func() error {
		last := lastProbe(t, namespace)
		if last != result && !strings.HasPrefix(last, result+":") {
			return fmt.Errorf("the client's last probe: %s", last)
		}
		return nil
	})
}

// waitForPolicyReplica waits until sync is Ready and its replica in namespace, marked as
// cmsync's, holds spec.
func waitForPolicyReplica(t *testing.T, sync *v1alpha1.ObjectSync, namespace string, spec networkingv1.NetworkPolicySpec) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 60*time.Second, "the replica of "+sync.Name+" in "+namespace, func() error {
		now := &v1alpha1.ObjectSync{}
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(sync), now); err != nil {
			return err
		}
		if ready := meta.FindStatusCondition(now.Status.Conditions, v1alpha1.ConditionReady); ready == nil ||
			ready.Status != metav1.ConditionTrue || now.Status.Synced != "1/1" {
			return fmt.Errorf("Ready %+v, synced %q", ready, now.Status.Synced)
		}
		replica := &networkingv1.NetworkPolicy{}
		if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: sync.Spec.Source.Name}, replica); err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(replica); ref == nil || ref.UID != now.UID ||
			replica.Labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue {
			return fmt.Errorf("not cmsync's replica: labels %v, owners %v", replica.Labels, replica.OwnerReferences)
		}
		if !equality.Semantic.DeepEqual(replica.Spec, spec) {
			return fmt.Errorf("replica spec %+v, want %+v", replica.Spec, spec)
		}
		return nil
	})
}
