package cli

import "testing"

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
