package cli

import (
	"strings"
	"testing"
)

// The permissions the plugin names are the words of a Role's rule: verb, resource (with
// its API group) and where.
func TestPermissionNamesTheRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    permission
		want string
	}{
		{"cluster-scoped", mayList(namespaceKind, ""), "list namespaces (cluster-wide)"},
		{"a namespace itself", mayGet(namespaceKind, "team-a"), "get namespace team-a"},
		{"in every namespace", mayList(configMapKind, ""), "list configmaps (cluster-wide)"},
		{"in one namespace", mayList(secretKind, "team-a"), "list secrets in namespace team-a"},
		{"an API group", mayList("ConfigMapSync", ""), "list configmapsyncs.cmsync.io (cluster-wide)"},
		{"apps", mayGet(deploymentKind, "cmsync-system"), "get deployments.apps in namespace cmsync-system"},
		{"a kind an ObjectSync copies", mayList("networking.k8s.io/v1/NetworkPolicy", ""), "list networkpolicies.networking.k8s.io (cluster-wide)"},
		{"a core one", mayGet("v1/LimitRange", "team-a"), "get limitranges in namespace team-a"},
		{"a vowel before y", mayList("gateway.networking.k8s.io/v1/Gateway", ""), "list gateways.gateway.networking.k8s.io (cluster-wide)"},
		{"es", mayList("networking.k8s.io/v1/Ingress", ""), "list ingresses.networking.k8s.io (cluster-wide)"},
		{"ObjectSyncs", mayGet("ObjectSync", ""), "get objectsyncs.cmsync.io (cluster-wide)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.String(); got != tc.want {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
}

func TestButNamesWhereItLooked(t *testing.T) {
	for _, tc := range []struct {
		read []string
		want string
	}{
		{nil, ""},
		{[]string{"a"}, " but a"},
		{[]string{"a", "b", "c"}, " but a, b and c"},
	} {
		if got := but(tc.read); got != tc.want {
			t.Errorf("but(%v) = %q, want %q", tc.read, got, tc.want)
		}
	}
}

// What was missed is said once, however often a command met it.
func TestMissedOnce(t *testing.T) {
	m := &missed{}
	m.add(mayList(namespaceKind, ""), "x")
	m.add(mayList(namespaceKind, ""), "x")
	m.add(mayList(namespaceKind, ""), "y")
	if got := m.list(); len(got) != 2 {
		t.Errorf("%+v, want two", got)
	}
}

// An object is named as today (--kind and NAMESPACE/NAME or NAME), or as kubectl names
// an explicit one (osync/NAME) when --kind is not given.
func TestKindAndRef(t *testing.T) {
	for _, tc := range []struct {
		flag       string
		given      bool
		ref        string
		kind, name string
		err        string
	}{
		{"configmap", false, "platform/ca", configMapKind, "platform/ca", ""},
		{"configmap", false, "osync/deny", "ObjectSync", "deny", ""},
		{"configmap", false, "objectsync/deny", "ObjectSync", "deny", ""},
		{"configmap", false, "cms/ca", "ConfigMapSync", "ca", ""},
		{"configmap", true, "osync/deny", configMapKind, "osync/deny", ""},
		{"objectsync", true, "deny", "ObjectSync", "deny", ""},
		{"networking.k8s.io/v1/NetworkPolicy", true, "team-a/deny", "networking.k8s.io/v1/NetworkPolicy", "team-a/deny", ""},
		{"networking.k8s.io/v1/networkpolicies", true, "team-a/deny", "", "", `kind "networkpolicies"`},
		{"v1/ConfigMap", true, "a/b", "", "", "ConfigMaps are copied by"},
		{"networkpolicy", true, "a/b", "", "", "group/version/Kind for a replica of an ObjectSync"},
		{"v1/LimitRange,v1/ResourceQuota", true, "a/b", "", "", "name one kind"},
	} {
		kind, name, err := kindAndRef(tc.flag, tc.given, tc.ref)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s %q: %v, want %q", tc.flag, tc.ref, err, tc.err)
		case tc.err == "" && (err != nil || kind != tc.kind || name != tc.name):
			t.Errorf("%s %q: %s %s %v, want %s %s", tc.flag, tc.ref, kind, name, err, tc.kind, tc.name)
		}
	}
}
