package replicator

import (
	"context"
	"fmt"
	"slices"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cmsync/cmsync/desired"
)

// In scoped mode (--namespaces) cmsync's caches hold one informer per namespace it
// serves. An informer of a namespace that does not exist yet, or where cmsync may not
// list yet (its Role comes with the namespace: a Role cannot precede its namespace),
// would never list, and the caches would never sync: cmsync would serve nothing. So
// cmsync serves the listed namespaces it can reach at its start, and checks the others
// every scopeRecheck; once one is reachable it starts again (Rescope) to serve it too.
// A restart of cmsync writes nothing when every replica is in sync.

// scopeRecheck is how often cmsync checks whether a listed namespace it cannot serve
// yet has become reachable.
const scopeRecheck = 30 * time.Second

// ListNamespaces reads every namespace from the API server, before the manager's cache
// holds them (at a start).
func ListNamespaces(ctx context.Context, cs kubernetes.Interface) ([]desired.Namespace, error) {
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

// Reachable splits the listed namespaces into those cmsync can serve now — the
// namespace is among namespaces, not terminating, and cmsync may list and watch the
// kinds it replicates there — and the others, each with its reason.
func Reachable(
	ctx context.Context, cs kubernetes.Interface, namespaces []desired.Namespace, listed []string, secrets bool,
) (reachable []string, waiting map[string]string, err error) {
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
		reachable = append(reachable, ns)
	}
	return reachable, waiting, nil
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

// Rescope checks every scopeRecheck whether a listed namespace cmsync could not serve
// at its start has become reachable, and calls restart once one has. It runs in every
// process, leading or not, and reads the namespaces from the manager's cache.
type Rescope struct {
	clientset  kubernetes.Interface
	namespaces namespaceLister
	synced     func(context.Context) bool
	waiting    []string
	secrets    bool
	restart    func(reason string)
}

// NewRescope is the recheck of the waiting namespaces, for mgr.Add.
func NewRescope(ctx context.Context, mgr ctrl.Manager, cs kubernetes.Interface, waiting []string, secrets bool, restart func(reason string)) (Rescope, error) {
	namespaces, err := newNamespaceLister(ctx, mgr.GetCache())
	if err != nil {
		return Rescope{}, err
	}
	return Rescope{clientset: cs, namespaces: namespaces, synced: allSynced(mgr.GetCache()), waiting: waiting, secrets: secrets, restart: restart}, nil
}

func (r Rescope) Start(ctx context.Context) error {
	if len(r.waiting) == 0 || !r.synced(ctx) {
		return nil
	}
	logger := log.FromContext(ctx).WithName("scope")
	ticker := time.NewTicker(scopeRecheck)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		reachable, _, err := Reachable(ctx, r.clientset, r.namespaces.List(), r.waiting, r.secrets)
		if err != nil {
			logger.Error(err, "checking the listed namespaces cmsync does not serve yet")
			continue
		}
		if len(reachable) > 0 {
			r.restart(fmt.Sprintf("listed namespaces now reachable: %v", reachable))
			return nil
		}
	}
}

func (Rescope) NeedLeaderElection() bool { return false }
