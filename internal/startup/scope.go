package startup

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cmsync/cmsync/desired"
)

// In scoped mode (--namespaces) cmsync's caches hold one informer per namespace it
// serves. An informer of a namespace that does not exist yet, or where cmsync may not
// list yet (its Role comes with the namespace: a Role cannot precede its namespace),
// would never list, and the caches would never sync: cmsync would serve nothing. So
// cmsync serves the listed namespaces it can reach at its start, and checks the others
// every recheck; once one is reachable it starts again to serve it too (StartAgain).
// A restart of cmsync writes nothing when every replica is in sync.

// scopeWait is how often a start that can serve none of the listed namespaces looks
// again before it goes on.
const scopeWait = 10 * time.Second

// Scope is what cmsync serves of the namespaces it lists (--namespaces) at a start.
// The zero Scope is every namespace.
type Scope struct {
	// Served are the listed namespaces cmsync can reach: its caches' namespaces.
	Served []string
	// Waiting are the listed namespaces it cannot reach yet.
	Waiting []string
	// secrets says whether reaching a namespace takes the Secrets' grants too.
	secrets bool
}

// ServedScope splits the listed namespaces into those cmsync can serve now and the
// others, logging each of these with its reason. While it can serve none, it waits:
// with an empty scope cmsync would serve every namespace. Without listed namespaces
// it asks nothing.
func ServedScope(ctx context.Context, cs kubernetes.Interface, listed []string, secrets bool) (Scope, error) {
	if len(listed) == 0 {
		return Scope{}, nil
	}
	logger := ctrl.Log.WithName("scope")
	for {
		namespaces, err := listNamespaces(ctx, cs)
		if err != nil {
			return Scope{}, err
		}
		served, reasons, err := reachable(ctx, cs, namespaces, listed, secrets)
		if err != nil {
			return Scope{}, err
		}
		for _, ns := range slices.Sorted(maps.Keys(reasons)) {
			logger.Info("a namespace of --namespaces is not served yet; cmsync serves it once it can", "namespace", ns, "reason", reasons[ns])
		}
		if len(served) > 0 {
			return Scope{Served: served, Waiting: slices.Sorted(maps.Keys(reasons)), secrets: secrets}, nil
		}
		logger.Info("cmsync can serve none of its --namespaces yet; waiting", "namespaces", listed)
		select {
		case <-ctx.Done():
			return Scope{}, ctx.Err()
		case <-time.After(scopeWait):
		}
	}
}

// listNamespaces reads every namespace from the API server, before the manager's cache
// holds them.
func listNamespaces(ctx context.Context, cs kubernetes.Interface) ([]desired.Namespace, error) {
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	namespaces := make([]desired.Namespace, 0, len(list.Items))
	for i := range list.Items {
		namespaces = append(namespaces, desired.NamespaceOf(&list.Items[i]))
	}
	return namespaces, nil
}

// reachable splits the listed namespaces into those cmsync can serve now — the
// namespace is among namespaces, not terminating, and cmsync may list and watch the
// kinds it replicates there — and the others, each with its reason.
func reachable(
	ctx context.Context, cs kubernetes.Interface, namespaces []desired.Namespace, listed []string, secrets bool,
) (served []string, waiting map[string]string, err error) {
	exists := map[string]bool{}
	for _, ns := range namespaces {
		exists[ns.Name] = !ns.Terminating
	}
	waiting = map[string]string{}
	for _, ns := range listed {
		if !exists[ns] {
			waiting[ns] = "the namespace does not exist (or is being deleted)"
			continue
		}
		missing, err := missingGrants(ctx, cs, ns, secrets)
		if err != nil {
			return nil, nil, err
		}
		if missing != "" {
			waiting[ns] = "cmsync may not " + missing + " there (the chart's Role in that namespace is missing)"
			continue
		}
		served = append(served, ns)
	}
	return served, waiting, nil
}

// missingGrants names what cmsync may not do in namespace of what its caches need
// there (list and watch ConfigMaps, and Secrets), asking the API server what this
// identity may do there; "" when nothing is missing.
func missingGrants(ctx context.Context, cs kubernetes.Interface, namespace string, secrets bool) (string, error) {
	review, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: namespace}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("asking what cmsync may do in namespace %s: %w", namespace, err)
	}
	resources := []string{"configmaps"}
	if secrets {
		resources = append(resources, "secrets")
	}
	for _, resource := range resources {
		for _, verb := range []string{"list", "watch"} {
			if !allows(review.Status.ResourceRules, resource, verb) {
				return verb + " " + resource, nil
			}
		}
	}
	return "", nil
}

// allows reports whether rules grant verb on resource of the core group.
func allows(rules []authorizationv1.ResourceRule, resource, verb string) bool {
	return slices.ContainsFunc(rules, func(r authorizationv1.ResourceRule) bool {
		return matches(r.APIGroups, "") && matches(r.Resources, resource) && matches(r.Verbs, verb) && len(r.ResourceNames) == 0
	})
}

func matches(values []string, want string) bool {
	return slices.Contains(values, want) || slices.Contains(values, "*")
}
