//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/cli"
	"github.com/cmsync/cmsync/test/harness"
)

// A tenant with edit in its namespace gives its synced source 50,000 data keys and a
// cmsync.io/keys list of 257 globs: every pass would match each glob against each key.
// The source is Invalid, naming the annotation, its count and the limit; its replica
// is kept as it was (an Invalid source changes nothing); the tenant's own kubectl
// cmsync explain says the same; and another tenant's new source is replicated
// meanwhile.
func TestTenantCannotTieUpCmsyncWithALongList(t *testing.T) {
	harness.StartController(t)
	ctx := context.Background()
	suffix := randomSuffix()
	home, target := harness.NewNamespace(t, "lists-"+suffix, nil), harness.NewNamespace(t, "lists-"+suffix+"-t", nil)
	victimSrc, victimDst := harness.NewNamespace(t, "victim-"+suffix, nil), harness.NewNamespace(t, "victim-"+suffix, nil)
	harness.DeleteSourcesAtEnd(t, []string{home, victimSrc})
	tenantConfig := editorConfigIn(t, home)
	tenant, err := client.New(tenantConfig, client.Options{Scheme: harness.K8s.Scheme()})
	must(t, err)

	data := make(map[string]string, 50000)
	for i := range 50000 {
		data[fmt.Sprintf("z%05d", i)] = "v"
	}
	must(t, tenant.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "wide", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: target}},
		Data: data,
	}))
	harness.WaitForReplicas(t, home, "wide", 60*time.Second, target)
	harness.WaitForAnnotation(t, home, "wide", v1alpha1.StatusAnnotation, v1alpha1.StatusSynced)
	replica, err := harness.GetConfigMap(target, "wide")
	must(t, err)

	keys := strings.TrimSuffix(strings.Repeat("!z*,", v1alpha1.MaxListEntries+1), ",")
	must(t, tenant.Patch(
		ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "wide"}},
		client.RawPatch(
			types.MergePatchType,
			harness.MustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.KeysAnnotation: keys}}}),
		),
	))

	// Another tenant's source, created while cmsync works on the long list.
	must(t, editorIn(t, victimSrc).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: victimSrc, Name: "settings", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: victimDst}},
		Data: map[string]string{"k": "v"},
	}))

	want := fmt.Sprintf("%s has %d entries, over the limit of %d", v1alpha1.KeysAnnotation, v1alpha1.MaxListEntries+1, v1alpha1.MaxListEntries)
	got := harness.WaitForAnnotation(t, home, "wide", v1alpha1.StatusAnnotation, v1alpha1.StatusInvalid)
	if msg := got.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, want) {
		t.Errorf("message %q, want one saying %q", msg, want)
	}
	harness.WaitForReplicas(t, victimSrc, "settings", 30*time.Second, victimDst)

	consistently(t, 3*time.Second, "the replica kept as it was", func() error {
		now, err := harness.GetConfigMap(target, "wide")
		if err != nil {
			return err
		}
		if now.UID != replica.UID || now.ResourceVersion != replica.ResourceVersion {
			return fmt.Errorf("uid %s, version %s -> %s: it was written", now.UID, replica.ResourceVersion, now.ResourceVersion)
		}
		return nil
	})

	// The tenant's own plugin decides with the controller's code, and says the same.
	var e cli.Explanation
	harness.PluginAs(tenantConfig.Impersonate).JSON(t, &e, "explain", home+"/wide", "--in", home)
	if !strings.Contains(e.Invalid, want) {
		t.Errorf("kubectl cmsync explain, as the tenant: Invalid %q, want one saying %q", e.Invalid, want)
	}
}
