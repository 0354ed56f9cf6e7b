package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/policyflags"
)

// use is what a command does with the cluster, which decides what its preamble reads.
type use int

const (
	// reads only what the controller wrote (status): no policy.
	reads use = iota
	// decides as the controller does, under its policy or, where that cannot be read,
	// the binary's defaults, and says which.
	decides
	// applies writes under the controller's own policy, or refuses (migrate --apply).
	applies
)

// session is what every command starts from: a client as kubectl's flags say, the
// namespace of their context, what the user's rights did not let it read, and, for a
// command that decides, the controller as read from its release.
type session struct {
	cluster
	namespace  string
	controller controllerView
}

// open is the preamble every command shares: connect, then, for a command that
// decides, find the controller's release and read its policy.
func (o *options) open(cmd *cobra.Command, u use) (session, error) {
	c, namespace, err := o.connect()
	if err != nil {
		return session{}, err
	}
	s := session{cluster: c, namespace: namespace}
	if u == reads {
		return s, nil
	}
	if s.controller, err = o.controllerView(cmd, c, u == applies); err != nil {
		return s, err
	}
	s.controller.objectKinds, err = c.servedKinds(s.controller.enabled)
	return s, err
}

// connect builds a client from kubectl's flags and returns the context's namespace.
func (o *options) connect() (cluster, string, error) {
	config := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(o.loading, &o.overrides)
	rest, err := config.ClientConfig()
	if err != nil {
		return cluster{}, "", err
	}
	namespace, _, err := config.Namespace()
	if err != nil {
		return cluster{}, "", err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return cluster{}, "", err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return cluster{}, "", err
	}
	c, err := client.New(rest, client.Options{Scheme: scheme})
	if err != nil {
		return cluster{}, "", err
	}
	return cluster{client: c, missed: &missed{}}, namespace, nil
}

// controllerView reads the controller's policy from the release the options point at,
// with the policy flags this command was given (decideController), for a command that
// writes (apply) or only reads. When it is not the controller's, it also warns on the
// command's standard error, beside what its answer says.
func (o *options) controllerView(cmd *cobra.Command, c cluster, apply bool) (controllerView, error) {
	if problems := validation.IsDNS1123Label(o.controller.namespace); len(problems) > 0 {
		return controllerView{}, fmt.Errorf("--controller-namespace=%q: %s", o.controller.namespace, strings.Join(problems, "; "))
	}
	if o.controller.name != "" {
		if problems := validation.IsDNS1123Subdomain(o.controller.name); len(problems) > 0 {
			return controllerView{}, fmt.Errorf("--controller-name=%q: %s", o.controller.name, strings.Join(problems, "; "))
		}
	}
	given := policyflags.Values{}
	for _, f := range policyflags.All {
		if o.flags.Changed(f.Name) {
			given[f.Name] = *o.policy[f.Name]
		}
	}
	read, err := c.readRelease(cmd.Context(), o.controller)
	if err != nil {
		return controllerView{}, err
	}
	view, err := decideController(read, given, apply)
	// The release's namespace is where the controller runs: no ObjectSync writes there.
	view.policy.ControllerNamespace = o.controller.namespace
	if err == nil && view.unread != "" {
		printf(cmd.ErrOrStderr(), "warning: NOT the controller's policy: %s; deciding with %s\n", view.unread, view.basis)
	}
	return view, err
}
