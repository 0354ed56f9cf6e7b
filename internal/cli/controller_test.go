package cli

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/internal/policyflags"
)

// release is a Deployment labelled as the chart labels a release, running cmsync with
// args.
func release(namespace, name string, args ...string) appsv1.Deployment {
	return appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{
			releaseNameLabel: releaseNameValue, releaseInstanceLabel: name, "app.kubernetes.io/managed-by": "Helm",
		}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Args: []string{"--exclude-namespaces="}},
			{Name: controllerContainer, Args: args},
		}}}},
	}
}

func TestReleaseOf(t *testing.T) {
	ns := DefaultControllerNamespace
	unlabelled := release(ns, "cmsync", "--exclude-namespaces=")
	delete(unlabelled.Labels, releaseInstanceLabel)
	commanded := release(ns, "cmsync")
	commanded.Spec.Template.Spec.Containers[1].Command = []string{"/ko-app/cmsync", "--tenant-label=tenant"}
	shell := release(ns, "cmsync")
	shell.Spec.Template.Spec.Containers[1].Command = []string{"sh", "-c", "cmsync --exclude-namespaces="}
	nameless := release(ns, "cmsync")
	nameless.Spec.Template.Spec.Containers = nameless.Spec.Template.Spec.Containers[:1]
	for _, tc := range []struct {
		name  string
		ref   controllerRef
		found []appsv1.Deployment
		// deployment read, or a fragment of why none (unread), or of the error.
		deployment, unread, err string
		exclude                 string
	}{
		{name: "the release", ref: controllerRef{namespace: ns}, found: []appsv1.Deployment{release(ns, "cmsync", "--exclude-namespaces=kube-*")},
			deployment: "cmsync-system/cmsync", exclude: "kube-*"},
		{name: "its defaults", ref: controllerRef{namespace: ns}, found: []appsv1.Deployment{release(ns, "cmsync")},
			deployment: "cmsync-system/cmsync", exclude: "kube-system,kube-public,kube-node-lease"},
		{name: "none", ref: controllerRef{namespace: ns}, unread: "no cmsync release in namespace cmsync-system"},
		{name: "a look-alike in another namespace is never believed", ref: controllerRef{namespace: ns},
			found: []appsv1.Deployment{release("tenant", "cmsync", "--exclude-namespaces=")}, unread: "no cmsync release in namespace cmsync-system"},
		{name: "two releases", ref: controllerRef{namespace: ns},
			found: []appsv1.Deployment{release(ns, "cmsync"), release(ns, "cmsync-shadow", "--exclude-namespaces=")},
			err: "ambiguous: namespace cmsync-system holds 2 Deployments labelled app.kubernetes.io/name=cmsync and app.kubernetes.io/instance " +
				"(cmsync, cmsync-shadow)"},
		{name: "two releases, one named", ref: controllerRef{namespace: ns, name: "cmsync"},
			found:      []appsv1.Deployment{release(ns, "cmsync"), release(ns, "cmsync-shadow", "--exclude-namespaces=")},
			deployment: "cmsync-system/cmsync", exclude: "kube-system,kube-public,kube-node-lease"},
		{name: "named, not labelled as a release", ref: controllerRef{namespace: ns, name: "cmsync"}, found: []appsv1.Deployment{unlabelled},
			unread: "is not labelled app.kubernetes.io/name=cmsync and app.kubernetes.io/instance"},
		{name: "its own command", ref: controllerRef{namespace: ns}, found: []appsv1.Deployment{commanded},
			deployment: "cmsync-system/cmsync", exclude: "kube-system,kube-public,kube-node-lease"},
		{name: "a shell", ref: controllerRef{namespace: ns}, found: []appsv1.Deployment{shell}, unread: `runs "sh", not cmsync`},
		{name: "no cmsync container", ref: controllerRef{namespace: ns}, found: []appsv1.Deployment{nameless}, unread: "no container named cmsync"},
		{name: "the environment", ref: controllerRef{namespace: ns}, found: []appsv1.Deployment{release(ns, "cmsync", "--exclude-namespaces=$(EXCLUDED)")},
			unread: "environment"},
		{name: "flags cmsync would not start with", ref: controllerRef{namespace: ns}, found: []appsv1.Deployment{release(ns, "cmsync", "--secrets=yes")},
			unread: `cmsync would not start with them: --secrets="yes"`},
		{name: "kinds cmsync would not start with", ref: controllerRef{namespace: ns},
			found:  []appsv1.Deployment{release(ns, "cmsync", "--object-kinds=v1/ConfigMap")},
			unread: `cmsync would not start with them: --object-kinds entry "v1/ConfigMap": ConfigMaps are copied by`},
		{name: "the kinds it copies", ref: controllerRef{namespace: ns},
			found:      []appsv1.Deployment{release(ns, "cmsync", "--object-kinds", "networking.k8s.io/v1/NetworkPolicy")},
			deployment: "cmsync-system/cmsync", exclude: "kube-system,kube-public,kube-node-lease"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read, err := releaseOf(tc.ref, tc.found)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
			case err != nil:
				t.Errorf("error %v", err)
			case read.deployment != tc.deployment || !strings.Contains(read.unread, tc.unread) || (tc.unread == "") != (read.unread == ""):
				t.Errorf("read %q, unread %q; want %q, %q", read.deployment, read.unread, tc.deployment, tc.unread)
			case tc.exclude != "" && read.values[policyflags.ExcludeNamespaces.Name] != tc.exclude:
				t.Errorf("--exclude-namespaces=%q, want %q", read.values[policyflags.ExcludeNamespaces.Name], tc.exclude)
			}
		})
	}
	if read, _ := releaseOf(controllerRef{namespace: ns}, []appsv1.Deployment{commanded}); read.values[policyflags.TenantLabel.Name] != "tenant" {
		t.Errorf("the flags in the command: %v", read.values)
	}
}

func TestDecideController(t *testing.T) {
	values, err := policyflags.FromArgs([]string{"--exclude-namespaces=kube-*,vault", "--tenant-label=tenant", "--secrets=enabled",
		"--object-kinds=networking.k8s.io/v1/NetworkPolicy"})
	if err != nil {
		t.Fatal(err)
	}
	read := releaseRead{deployment: "cmsync-system/cmsync", values: values}
	unread := releaseRead{unread: "no cmsync release in namespace cmsync-system"}
	for _, tc := range []struct {
		name  string
		read  releaseRead
		given policyflags.Values
		apply bool
		// where the policy is said to come from, or a fragment of the refusal.
		where, refused string
		exclude        []string
		tenant         string
		secrets        bool
	}{
		{name: "the release", read: read, where: "the flags of Deployment cmsync-system/cmsync",
			exclude: []string{"kube-*", "vault"}, tenant: "tenant", secrets: true},
		{name: "the release, to apply", read: read, apply: true, where: "the flags of Deployment cmsync-system/cmsync",
			exclude: []string{"kube-*", "vault"}, tenant: "tenant", secrets: true},
		{name: "a flag over the release", read: read, given: policyflags.Values{"tenant-label": ""},
			where:   "the flags of Deployment cmsync-system/cmsync, with this command's --tenant-label over them",
			exclude: []string{"kube-*", "vault"}, secrets: true},
		{name: "a flag that would change the release's, to apply", read: read, apply: true,
			given:   policyflags.Values{"exclude-namespaces": "", "tenant-label": "tenant"},
			refused: `this command's --exclude-namespaces="" (the controller's: "kube-*,vault") would change it`},
		{name: "a flag that repeats the release's, to apply", read: read, apply: true, given: policyflags.Values{"tenant-label": "tenant"},
			where:   "the flags of Deployment cmsync-system/cmsync, which this command's --tenant-label repeat",
			exclude: []string{"kube-*", "vault"}, tenant: "tenant", secrets: true},
		{name: "no release", read: unread,
			where:   "the binary's default flags, NOT the controller's policy: no cmsync release in namespace cmsync-system",
			exclude: []string{"kube-system", "kube-public", "kube-node-lease"}},
		{name: "no release, a flag given", read: unread, given: policyflags.Values{"exclude-namespaces": "kube-*"},
			where:   "this command's --exclude-namespaces over the binary's default flags, NOT the controller's policy: no cmsync release",
			exclude: []string{"kube-*"}},
		{name: "no release, to apply", read: unread, apply: true,
			refused: "migrate --apply refused: it takes copies over only under the controller's own policy, and it could not read it: " +
				"no cmsync release in namespace cmsync-system. Point --controller-namespace"},
		{name: "no release, every flag given, to apply", read: unread, apply: true, given: policyflags.Defaults(),
			refused: "policy flags given to the plugin do not stand in for the controller's"},
		{name: "a malformed flag", read: read, given: policyflags.Values{"namespaces": "team-*"}, refused: "--namespaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view, err := decideController(tc.read, tc.given, tc.apply)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Errorf("error %v, want %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(view.where, tc.where) || (view.unread == "") != (tc.read.deployment != "") {
				t.Errorf("where %q (unread %q), want %q", view.where, view.unread, tc.where)
			}
			if !slices.Equal(view.policy.ExcludeNamespaces, tc.exclude) || view.policy.TenantLabel != tc.tenant || view.runs.Secrets != tc.secrets {
				t.Errorf("policy %+v, runs %+v", view.policy, view.runs)
			}
			// The kinds ObjectSyncs may name are the release's, or none without one.
			want := 0
			if tc.read.deployment != "" {
				want = 1
			}
			if len(view.enabled) != want {
				t.Errorf("enabled kinds %v, want %d", view.enabled, want)
			}
		})
	}
}
