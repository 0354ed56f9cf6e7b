//go:build e2e

package harness

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// permission is one verb on one resource ("configmapsyncs/status" for a subresource).
type permission struct{ group, resource, verb string }

func (p permission) String() string {
	group := p.group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s %s/%s", p.verb, group, p.resource)
}

// mayGoUnused are grants cmsync needs only in a race the suites do not provoke, or
// that the contract gives it. client-go's events recorder turns an Event into a series
// (a patch of the first) when one with the same key (the object at the same
// resourceVersion, the same reason) is recorded again within 6 minutes. cmsync records
// an Event again for the same version of a source only when a pass that read it before
// cmsync's own status write reached the cache also changed replicas
// (writeThenAnnounce); without the grant, that rare series would be refused. Reading
// namespaces is get, list and watch by SPEC §10 (the one cluster-wide grant of scoped
// mode besides cmsync's own kinds); cmsync reads them through its watch, and gets
// none by name. Such a grant may go unused, but never be refused.
var mayGoUnused = map[permission]bool{{"events.k8s.io", "events", "patch"}: true, {"", "namespaces", "get"}: true}

// mayGoUnusedOnObjectKind tells a grant cmsync needs only in a race the suites do not
// provoke, on an ObjectSync kind: patch. cmsync patches such a replica only when its
// whole-object update met a conflict (the replica changed between the store's view and
// the write), yet its start checks it holds every verb it may use on the kind.
func mayGoUnusedOnObjectKind(p permission) bool {
	own := p.group == "" && (p.resource == "configmaps" || p.resource == "secrets" || p.resource == "namespaces") ||
		p.group == "events.k8s.io" || p.group == "cmsync.io"
	return p.verb == mayGoUnusedVerb && !own
}

// mayGoUnusedVerb is the verb of mayGoUnusedOnObjectKind.
const mayGoUnusedVerb = "patch"

// checkedWithin are grants the API server checks within another request, which its
// audit log records as that request alone: escalate on Roles within a create or update
// of a Role, bind on Roles and ClusterRoles within a create or update of a RoleBinding
// (RBAC's escalation check). A write of cmsync's of that kind uses them;
// TestObjectSyncRolesNeedTheChartsEscalateAndBind shows the same writes refused without.
var checkedWithin = map[permission][]permission{
	{rbacv1.GroupName, "roles", "escalate"}:    writesOf("roles"),
	{rbacv1.GroupName, "roles", "bind"}:        writesOf("rolebindings"),
	{rbacv1.GroupName, "clusterroles", "bind"}: writesOf("rolebindings"),
}

// writesOf are a create and an update of resource of the RBAC group.
func writesOf(resource string) []permission {
	return []permission{{rbacv1.GroupName, resource, "create"}, {rbacv1.GroupName, resource, "update"}}
}

// usedWithin tells whether a request cmsync made used p within it (checkedWithin).
func usedWithin(p permission, used map[permission]bool) bool {
	return slices.ContainsFunc(checkedWithin[p], func(by permission) bool { return used[by] })
}

// CheckLeastPrivilege compares what the chart grants cmsync's ServiceAccount (every
// ClusterRole and Role bound to it, as installed) with what the whole suite saw cmsync
// use in the API server's audit log. A grant never used, or a request the authorizer
// refused, is an error: the chart must grant exactly what cmsync needs.
func CheckLeastPrivilege(suite string) error {
	granted, err := grantedPermissions()
	if err != nil {
		return err
	}
	used, denied, err := usedPermissions()
	if err != nil {
		return err
	}
	var problems, unused []string
	for _, p := range granted {
		switch {
		case used[p], usedWithin(p, used):
		case mayGoUnused[p] || mayGoUnusedOnObjectKind(p):
			unused = append(unused, p.String())
		default:
			problems = append(problems, "granted but never used: "+p.String())
		}
	}
	for p, r := range denied {
		problems = append(problems, fmt.Sprintf("used but refused by RBAC: %s (first at %s: %s %s)",
			p, r.Received.Format(time.RFC3339Nano), r.Verb, r.RequestURI))
	}
	slices.Sort(problems)
	if len(problems) > 0 {
		return fmt.Errorf("the chart's RBAC is not exactly what cmsync uses:\n  %s", strings.Join(problems, "\n  "))
	}
	fmt.Fprintf(os.Stderr, "%s: least privilege: %d of %d granted permissions used, none refused; unused, as they may be: %v\n",
		suite, len(granted)-len(unused), len(granted), slices.Compact(slices.Sorted(slices.Values(unused))))
	return nil
}

// grantedPermissions are the permissions of every role bound to cmsync's
// ServiceAccount, whatever namespace a Role is in.
func grantedPermissions() ([]permission, error) {
	rules, err := boundRules(context.Background())
	if err != nil {
		return nil, err
	}
	seen := map[permission]bool{}
	var out []permission
	for _, rule := range rules {
		if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
			return nil, fmt.Errorf("unexpected rule form %+v: extend this check", rule)
		}
		for _, g := range rule.APIGroups {
			for _, r := range rule.Resources {
				for _, v := range rule.Verbs {
					if p := (permission{g, r, v}); !seen[p] {
						seen[p] = true
						out = append(out, p)
					}
				}
			}
		}
	}
	return out, nil
}

// boundRules are the rules of the ClusterRoles and Roles bound to cmsync's
// ServiceAccount.
func boundRules(ctx context.Context) ([]rbacv1.PolicyRule, error) {
	isCmsync := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == ReleaseNamespace && s.Name == ServiceAccount
		})
	}
	var rules []rbacv1.PolicyRule
	var clusterBindings rbacv1.ClusterRoleBindingList
	if err := K8s.List(ctx, &clusterBindings); err != nil {
		return nil, err
	}
	for _, b := range clusterBindings.Items {
		if isCmsync(b.Subjects) {
			var role rbacv1.ClusterRole
			if err := K8s.Get(ctx, client.ObjectKey{Name: b.RoleRef.Name}, &role); err != nil {
				return nil, err
			}
			rules = append(rules, role.Rules...)
		}
	}
	var bindings rbacv1.RoleBindingList
	if err := K8s.List(ctx, &bindings); err != nil {
		return nil, err
	}
	for _, b := range bindings.Items {
		if isCmsync(b.Subjects) && b.RoleRef.Kind == "Role" {
			var role rbacv1.Role
			if err := K8s.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.RoleRef.Name}, &role); err != nil {
				return nil, err
			}
			rules = append(rules, role.Rules...)
		}
	}
	return rules, nil
}

// usedPermissions reads what cmsync's ServiceAccount asked for: allowed, and refused
// (with the first refused request).
func usedPermissions() (used map[permission]bool, denied map[permission]AuditRecord, err error) {
	used, denied = map[permission]bool{}, map[permission]AuditRecord{}
	err = EachAuditRecord(func(r AuditRecord) {
		if r.User.Username != CmsyncUser || r.ObjectRef == nil {
			return
		}
		resource := r.ObjectRef.Resource
		if r.ObjectRef.Subresource != "" {
			resource += "/" + r.ObjectRef.Subresource
		}
		p := permission{r.ObjectRef.APIGroup, resource, r.Verb}
		if r.Annotations["authorization.k8s.io/decision"] != "forbid" {
			used[p] = true
		} else if _, seen := denied[p]; !seen {
			denied[p] = r
		}
	})
	return used, denied, err
}

// FullRun tells whether every test of the suite ran, so that an unused grant means
// the chart grants too much rather than that a test was filtered out.
func FullRun() bool {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return !ExistingCluster
}
