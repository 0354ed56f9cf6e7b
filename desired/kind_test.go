package desired

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

func sampleSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "platform", Name: "tls", UID: "u1",
			Labels:      map[string]string{v1alpha1.ReplicateLabel: "true", "team": "platform"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: "*", "cert-manager.io/certificate-name": "tls"},
		},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: []byte("cert"), corev1.TLSPrivateKeyKey: []byte("key")},
	}
}

var tlsOwner = AnnotationOwner("Secret", types.NamespacedName{Namespace: "platform", Name: "tls"})

func TestSecretReplicaKeepsTypeAndData(t *testing.T) {
	kind := SecretKind{}
	replica := NewTemplate(kind, sampleSecret(), Shape{}, tlsOwner).In("team-a")
	if replica.Type != corev1.SecretTypeTLS || string(replica.Data[corev1.TLSCertKey]) != "cert" || replica.Namespace != "team-a" {
		t.Errorf("replica %+v", replica)
	}
	if !tlsOwner.Owns(replica) || replica.Annotations["cert-manager.io/certificate-name"] != "tls" {
		t.Errorf("markers or copied annotations missing: %v %v", replica.Labels, replica.Annotations)
	}
}

func TestSecretReplicasCarryNoValueInTheirMetadata(t *testing.T) {
	kind := SecretKind{}
	src := sampleSecret()
	template := NewTemplate(kind, src, Shape{}, tlsOwner)
	replica := template.In("team-a")
	for _, v := range src.Data {
		for k, l := range replica.Labels {
			if strings.Contains(k+l, string(v)) {
				t.Errorf("label %s=%s holds a value", k, l)
			}
		}
	}
	if d := template.Diff(replica); !d.InSync() {
		t.Errorf("an equal replica differs: %+v", d)
	}
}

func TestSecretTypeChangeRecreates(t *testing.T) {
	kind := SecretKind{}
	template := NewTemplate(kind, sampleSecret(), Shape{}, tlsOwner)
	replica := template.In("team-a")
	replica.Type = corev1.SecretTypeOpaque
	if d := template.Diff(replica); !d.Content || !d.Recreate {
		t.Errorf("a replica of another type must be recreated: %+v", d)
	}
}

func TestServiceAccountTokensAreNeverSources(t *testing.T) {
	token := sampleSecret()
	token.Type = corev1.SecretTypeServiceAccountToken
	if err := (SecretKind{}).CheckSource(token); err == nil || !strings.Contains(err.Error(), "never copied") {
		t.Errorf("CheckSource(token) = %v", err)
	}
	for _, typ := range []corev1.SecretType{corev1.SecretTypeOpaque, corev1.SecretTypeTLS, corev1.SecretTypeDockerConfigJson, "example.com/custom"} {
		s := sampleSecret()
		s.Type = typ
		if err := (SecretKind{}).CheckSource(s); err != nil {
			t.Errorf("CheckSource(%s) = %v", typ, err)
		}
	}
}

func TestSecretUpdatePatchPutsDataAsBase64(t *testing.T) {
	template := NewTemplate(SecretKind{}, sampleSecret(), Shape{}, tlsOwner)
	patch, err := template.UpdatePatch("u", Diff{StaleBinary: []string{"old"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(patch), `"data":{`) || !strings.Contains(string(patch), `"old":null`) ||
		!strings.Contains(string(patch), `"tls.crt":"Y2VydA=="`) || strings.Contains(string(patch), "binaryData") {
		t.Errorf("patch %s", patch)
	}
}
