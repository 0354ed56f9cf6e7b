package cli

import (
	"context"
	"fmt"
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/internal/policyflags"
)

// The plugin decides as the controller does only with the controller's policy, and
// the controller's flags are where its policy is set. It reads them from the
// Deployment of the cmsync release it is pointed at — one namespace, which only the
// cluster's administrators write — and never from an object found elsewhere: anyone
// who may create Deployments in a namespace of theirs can label one like cmsync's.
const (
	// DefaultControllerNamespace is the namespace of the release the docs install.
	DefaultControllerNamespace = "cmsync-system"
	// The chart's selector labels on its Deployment (_helpers.tpl, cmsync.selectorLabels):
	// the chart's name, and the release's name under instance.
	releaseNameLabel     = "app.kubernetes.io/name"
	releaseNameValue     = "cmsync"
	releaseInstanceLabel = "app.kubernetes.io/instance"
	// controllerContainer is the chart's container that runs cmsync.
	controllerContainer = "cmsync"
)

// releaseSelector selects the Deployments labelled as the chart labels a release's.
var releaseSelector = labels.SelectorFromSet(labels.Set{releaseNameLabel: releaseNameValue}).Add(mustExist(releaseInstanceLabel))

func mustExist(key string) labels.Requirement {
	r, err := labels.NewRequirement(key, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return *r
}

// releaseLabelsText names the labels releaseSelector selects, for messages.
var releaseLabelsText = fmt.Sprintf("labelled %s=%s and %s", releaseNameLabel, releaseNameValue, releaseInstanceLabel)

// controllerRef points the plugin at the cmsync release whose Deployment holds the
// controller's flags (--controller-namespace, --controller-name).
type controllerRef struct {
	namespace string
	// name is the Deployment's; "": the only one in namespace labelled as a release.
	name string
}

// releaseRead is what the plugin learned of the controller's flags from its release:
// the Deployment it read them from and their values, or why it read none.
type releaseRead struct {
	// deployment is "namespace/name"; "" when no flags were read.
	deployment string
	values     policyflags.Values
	// unread says why no flags were read: no release, one the user may not read, or
	// flags the plugin cannot tell.
	unread string
}

// readRelease reads the controller's flags from the Deployment of the cmsync release
// ref names. It gets or lists Deployments in ref.namespace only: a user who may read
// Deployments there, and nowhere else, can use every command. More than one release
// there, and none named, is an error: the plugin does not guess which is the
// controller.
func (c cluster) readRelease(ctx context.Context, ref controllerRef) (releaseRead, error) {
	if ref.name != "" {
		var d appsv1.Deployment
		err := c.client.Get(ctx, client.ObjectKey{Namespace: ref.namespace, Name: ref.name}, &d)
		switch {
		case apierrors.IsNotFound(err):
			return releaseRead{unread: fmt.Sprintf("there is no Deployment %s/%s", ref.namespace, ref.name)}, nil
		case apierrors.IsForbidden(err):
			return c.unreadable(mayGet(deploymentKind, ref.namespace), "Deployment "+ref.namespace+"/"+ref.name), nil
		case err != nil:
			return releaseRead{}, fmt.Errorf("reading Deployment %s/%s: %w", ref.namespace, ref.name, err)
		}
		return releaseOf(ref, []appsv1.Deployment{d})
	}
	var list appsv1.DeploymentList
	err := c.client.List(ctx, &list, client.InNamespace(ref.namespace), client.MatchingLabelsSelector{Selector: releaseSelector})
	switch {
	case apierrors.IsForbidden(err):
		return c.unreadable(mayList(deploymentKind, ref.namespace), "Deployments in namespace "+ref.namespace), nil
	case err != nil:
		return releaseRead{}, fmt.Errorf("listing the Deployments of namespace %s: %w", ref.namespace, err)
	}
	return releaseOf(ref, list.Items)
}

// unreadable is the release read when the user lacks missing, to read what: no
// policy, and why.
func (c cluster) unreadable(missing permission, what string) releaseRead {
	c.missed.add(missing, "the controller's policy, read from its release: the binary's defaults stand in for it")
	return releaseRead{unread: fmt.Sprintf("you may not %s %s (missing: %s)", missing.verb, what, missing)}
}

// releaseOf picks the release's Deployment among found, those of ref's namespace
// labelled as a release (or the one ref names), and reads its flags.
func releaseOf(ref controllerRef, found []appsv1.Deployment) (releaseRead, error) {
	found = slices.DeleteFunc(slices.Clone(found), func(d appsv1.Deployment) bool {
		return d.Namespace != ref.namespace || (ref.name != "" && d.Name != ref.name)
	})
	switch {
	case len(found) == 0:
		return releaseRead{unread: fmt.Sprintf("no cmsync release in namespace %s (no Deployment %s)", ref.namespace, releaseLabelsText)}, nil
	case len(found) > 1:
		names := make([]string, 0, len(found))
		for _, d := range found {
			names = append(names, d.Name)
		}
		slices.Sort(names)
		return releaseRead{}, fmt.Errorf(
			"the controller's policy is ambiguous: namespace %s holds %d Deployments %s (%s), and the plugin does not guess which one "+
				"runs the controller; name it with --controller-name",
			ref.namespace, len(found), releaseLabelsText, strings.Join(names, ", "))
	}
	d := &found[0]
	at := d.Namespace + "/" + d.Name
	if !releaseSelector.Matches(labels.Set(d.Labels)) {
		return releaseRead{unread: fmt.Sprintf("Deployment %s is not %s, as the chart labels a cmsync release", at, releaseLabelsText)}, nil
	}
	values, err := controllerFlags(d)
	if err != nil {
		return releaseRead{unread: fmt.Sprintf("the flags of Deployment %s cannot be told: %v", at, err)}, nil
	}
	return releaseRead{deployment: at, values: values}, nil
}

// controllerFlags reads the controller's flags from its container in d, as the
// controller parses them; an error says why they cannot be told.
func controllerFlags(d *appsv1.Deployment) (policyflags.Values, error) {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != controllerContainer {
			continue
		}
		args := c.Args
		if len(c.Command) > 0 {
			// The command replaces the image's entrypoint (/cmsync): only cmsync's own
			// arguments are known to be its flags.
			if path.Base(c.Command[0]) != "cmsync" {
				return nil, fmt.Errorf("its container %s runs %q, not cmsync", c.Name, c.Command[0])
			}
			args = slices.Concat(c.Command[1:], c.Args)
		}
		values, err := policyflags.FromArgs(args)
		if err != nil {
			return nil, err
		}
		if _, err := values.Policy(); err != nil {
			return nil, fmt.Errorf("cmsync would not start with them: %w", err)
		}
		if _, err := values.Runs(); err != nil {
			return nil, fmt.Errorf("cmsync would not start with them: %w", err)
		}
		if _, err := values.ObjectKinds(); err != nil {
			return nil, fmt.Errorf("cmsync would not start with them: %w", err)
		}
		return values, nil
	}
	return nil, fmt.Errorf("it has no container named %s", controllerContainer)
}

// controllerView is the controller as a command decides with it: its policy, which
// kinds and forms it runs, and where that was read, in words for every output.
type controllerView struct {
	policy desired.Policy
	runs   policyflags.Runs
	// enabled are the kinds an ObjectSync may name (--object-kinds); objectKinds what
	// the API server serves of them (servedKinds), as the controller asks it.
	enabled     []schema.GroupVersionKind
	objectKinds desired.ObjectKinds
	where       string
	// unread says why the policy is not the controller's ("": it is, read from its
	// release); basis what it is instead.
	unread, basis string
}

// decideController combines what was read from the release with the policy flags
// given to this command (given, by name). A command that only reads takes given over
// the release's flags, or, without a release, over the binary's defaults — and where
// says that it is not the controller's policy and why. migrate --apply writes: it takes
// copies over only under the controller's own policy, so it refuses without a release,
// and refuses a given flag that would change the release's policy. Nothing is
// guessed: every output names where its policy came from.
func decideController(read releaseRead, given policyflags.Values, apply bool) (controllerView, error) {
	var names []string
	for _, f := range policyflags.All {
		if _, ok := given[f.Name]; ok {
			names = append(names, "--"+f.Name)
		}
	}
	these := "this command's " + strings.Join(names, ", ")
	if read.deployment == "" {
		if apply {
			return controllerView{}, fmt.Errorf(
				"migrate --apply refused: it takes copies over only under the controller's own policy, and it could not read it: %s. "+
					"Point --controller-namespace (and --controller-name, where several releases share the namespace) at the cmsync release, "+
					"as a user who may get and list Deployments there; policy flags given to the plugin do not stand in for the controller's",
				read.unread)
		}
		basis := "the binary's default flags"
		if len(names) > 0 {
			basis = these + " over the binary's default flags"
		}
		view, err := viewOf(overlay(policyflags.Defaults(), given), basis+", NOT the controller's policy: "+read.unread)
		view.unread, view.basis = read.unread, basis
		return view, err
	}
	where := "the flags of Deployment " + read.deployment
	if len(names) == 0 {
		return viewOf(read.values, where)
	}
	if !apply {
		return viewOf(overlay(read.values, given), where+", with "+these+" over them")
	}
	controller, err := read.values.Policy()
	if err != nil {
		return controllerView{}, err
	}
	var differ []string
	for _, f := range policyflags.All {
		value, ok := given[f.Name]
		if !ok {
			continue
		}
		p, err := overlay(read.values, policyflags.Values{f.Name: value}).Policy()
		if err != nil {
			return controllerView{}, err
		}
		if !reflect.DeepEqual(p, controller) {
			differ = append(differ, fmt.Sprintf("--%s=%q (the controller's: %q)", f.Name, value, read.values[f.Name]))
		}
	}
	if len(differ) > 0 {
		return controllerView{}, fmt.Errorf(
			"migrate --apply refused: it takes copies over only under the controller's own policy, the flags of Deployment %s, "+
				"and this command's %s would change it; drop them (a preview without --apply may try another policy)",
			read.deployment, strings.Join(differ, ", "))
	}
	return viewOf(read.values, where+", which "+these+" repeat")
}

func viewOf(values policyflags.Values, where string) (controllerView, error) {
	policy, err := values.Policy()
	if err != nil {
		return controllerView{}, err
	}
	runs, err := values.Runs()
	if err != nil {
		return controllerView{}, err
	}
	enabled, err := values.ObjectKinds()
	if err != nil {
		return controllerView{}, err
	}
	return controllerView{policy: policy, runs: runs, enabled: enabled, where: where}, nil
}

// overlay is base with the values of over in place of its own.
func overlay(base, over policyflags.Values) policyflags.Values {
	out := maps.Clone(base)
	maps.Copy(out, over)
	return out
}
