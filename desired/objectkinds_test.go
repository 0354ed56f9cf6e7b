package desired

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestParseObjectKinds(t *testing.T) {
	np := schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}
	lr := schema.GroupVersionKind{Version: "v1", Kind: "LimitRange"}
	tests := []struct {
		name    string
		value   string
		want    []schema.GroupVersionKind
		wantErr string
	}{
		{name: "empty", value: ""},
		{name: "a group kind and a core kind", value: "networking.k8s.io/v1/NetworkPolicy, v1/LimitRange", want: []schema.GroupVersionKind{np, lr}},
		{name: "a custom resource", value: "keda.sh/v1alpha1/TriggerAuthentication",
			want: []schema.GroupVersionKind{{Group: "keda.sh", Version: "v1alpha1", Kind: "TriggerAuthentication"}}},
		{name: "blank entries", value: " ,v1/LimitRange,", want: []schema.GroupVersionKind{lr}},
		{name: "only commas", value: " , ", wantErr: "the list is empty"},
		{name: "no version", value: "NetworkPolicy", wantErr: "write group/version/Kind"},
		{name: "too many parts", value: "a/b/v1/Kind", wantErr: "write group/version/Kind"},
		{name: "a resource, not a kind", value: "networking.k8s.io/v1/networkpolicies", wantErr: `kind "networkpolicies"`},
		{name: "a bad version", value: "networking.k8s.io/1/NetworkPolicy", wantErr: `version "1"`},
		{name: "a bad group", value: "Networking_K8s/v1/NetworkPolicy", wantErr: `group "Networking_K8s"`},
		{name: "the core group named", value: "core/v1/LimitRange", wantErr: "write v1/LimitRange"},
		{name: "ConfigMap", value: "v1/ConfigMap", wantErr: "ConfigMapSync"},
		{name: "Secret", value: "v1/Secret", wantErr: "SecretSync"},
		{name: "twice", value: "v1/LimitRange,v1/LimitRange", wantErr: "listed twice"},
		{name: "every bad entry named", value: "x,v1/Secret", wantErr: `"x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseObjectKinds(tt.value)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--object-kinds") {
					t.Fatalf("error %v, want one naming --object-kinds and %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestCheckObjectKind(t *testing.T) {
	kinds := ObjectKinds{
		{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}:       Namespaced,
		{Group: "keda.sh", Version: "v1alpha1", Kind: "TriggerAuthentication"}:   NotServed,
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}: ClusterScoped,
	}
	tests := []struct {
		name, apiVersion, kind string
		wantErr                []string
	}{
		{name: "enabled and namespaced", apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy"},
		{name: "not enabled", apiVersion: "v1", kind: "LimitRange", wantErr: []string{"not enabled", "--object-kinds", "v1/LimitRange", "objectSync.kinds"}},
		{name: "another version", apiVersion: "networking.k8s.io/v1beta1", kind: "NetworkPolicy",
			wantErr: []string{"not enabled", "networking.k8s.io/v1beta1/NetworkPolicy"}},
		{name: "not served", apiVersion: "keda.sh/v1alpha1", kind: "TriggerAuthentication", wantErr: []string{"does not serve", "CustomResourceDefinition"}},
		{name: "cluster-scoped", apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", wantErr: []string{"cluster-scoped", "namespaced kinds only"}},
		{name: "ConfigMap", apiVersion: "v1", kind: "ConfigMap", wantErr: []string{"ConfigMapSync"}},
		{name: "Secret", apiVersion: "v1", kind: "Secret", wantErr: []string{"SecretSync"}},
		{name: "a malformed apiVersion", apiVersion: "a/b/c", kind: "X", wantErr: []string{"spec.source.apiVersion"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := kinds.CheckObjectKind(tt.apiVersion, tt.kind)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func FuzzParseObjectKinds(f *testing.F) {
	for _, seed := range []string{
		"networking.k8s.io/v1/NetworkPolicy,v1/LimitRange", "", ",", "v1/Secret", "a/b/c/d", "core/v1/X", "x.y/v1beta1/Z9", "/v1/X", "v1/",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		kinds, err := ParseObjectKinds(value)
		if err != nil {
			if !strings.Contains(err.Error(), "--object-kinds") {
				t.Fatalf("error does not name the flag: %q", err)
			}
			return
		}
		for _, gvk := range kinds {
			if gvk.Kind == "" || gvk.Version == "" || ownFormOf(gvk) != "" {
				t.Fatalf("%q parsed as %v", value, gvk)
			}
			// What parses is a kind the check can be asked about.
			if err := (ObjectKinds{gvk: Namespaced}).CheckObjectKind(gvk.GroupVersion().String(), gvk.Kind); err != nil {
				t.Fatalf("%q parsed as %v, which the check refuses: %v", value, gvk, err)
			}
		}
	})
}

// FuzzObjectTemplate builds the replica of an object whose content is any JSON, and
// of a changed source: the replica as built is in sync, and the update to the changed
// source is a patch that holds it.
func FuzzObjectTemplate(f *testing.F) {
	f.Add(`{"spec":{"podSelector":{},"policyTypes":["Ingress"]}}`, `{"spec":{"podSelector":{"matchLabels":{"a":"b"}}}}`)
	f.Add(`{"rules":[{"verbs":["get"]}],"x":1.5}`, `{"rules":null}`)
	f.Add(`{"data":{"k":"v"},"status":{"a":1}}`, `{}`)
	f.Fuzz(func(t *testing.T, before, after string) {
		source := func(content string) *unstructured.Unstructured {
			fields := map[string]any{}
			if json.Unmarshal([]byte(content), &fields) != nil {
				return nil
			}
			obj := defaultDeny()
			networkPolicies.SetContent(obj, Content{Fields: fields})
			return obj
		}
		old, changed := source(before), source(after)
		if old == nil || changed == nil {
			return
		}
		replica := NewTemplate(networkPolicies, old, Shape{}, objectSyncOwner).In("team-a")
		createdObjectByCmsync(t, replica)
		if d := NewTemplate(networkPolicies, old, Shape{}, objectSyncOwner).Diff(replica); !d.InSync() {
			t.Fatalf("a replica differs from its own source: %+v", d)
		}
		template := NewTemplate(networkPolicies, changed, Shape{}, objectSyncOwner)
		d := template.Diff(replica)
		raw, err := template.UpdatePatch("uid", d)
		if err != nil {
			t.Fatalf("patch: %v", err)
		}
		var patch map[string]any
		if err := json.Unmarshal(raw, &patch); err != nil {
			t.Fatalf("the patch is no JSON object: %s", raw)
		}
		if !d.InSync() && !fieldsHold(networkPolicies.Content(template.Replacement(metaOf(replica), d)).Fields, template.content.Fields) {
			t.Fatalf("the replacement does not hold the source: %+v", d)
		}
	})
}
