// Package policyflags declares, once, the controller's flags that make its policy
// (desired.Policy): where sources may live, where replicas may go, what they may weigh,
// which names are never written, the tenant boundary and the namespaces cmsync serves. The controller binds them;
// kubectl cmsync reads the same flags from the controller's Deployment (FromArgs), so
// that both decide from one policy with the same defaults, and with them the flags that
// say which kinds and forms the controller runs at all (Runs).
package policyflags

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cmsync/cmsync/desired"
)

// Flag is one policy flag: its name, default and help.
type Flag struct{ Name, Default, Usage string }

// The policy flags.
var (
	ExcludeNamespaces = Flag{"exclude-namespaces", "kube-system,kube-public,kube-node-lease",
		"Comma list of namespace globs that never receive a replica."}
	SourceNamespaces = Flag{"source-namespaces", "*",
		"Comma list of namespace globs where sources may live; sources elsewhere are reported Invalid."}
	MaxReplicatedBytes = Flag{"max-replicated-bytes", resource.NewQuantity(desired.DefaultMaxReplicatedBytes, resource.BinarySI).String(),
		"Most bytes of content one source may write across all its targets (a quantity, e.g. 1Gi; 0: no limit); a source over it is Invalid, before any write."}
	ReservedNames = Flag{
		"reserved-names",
		"",
		"Comma list of object names cmsync never creates, changes or deletes, besides kube-root-ca.crt (e.g. istio-ca-root-cert); " +
			"a source whose replicas would bear one is Invalid.",
	}
	Namespaces = Flag{
		"namespaces",
		"",
		"Comma list of the namespaces cmsync serves (scoped mode): it lists, watches, reads and writes ConfigMaps and Secrets only there, " +
			"sources elsewhere are never seen and targets elsewhere get nothing. Names only, no globs. Empty: every namespace.",
	}
	TenantLabel = Flag{
		"tenant-label",
		"",
		"Namespace label naming a namespace's tenant (e.g. capsule.clastix.io/tenant); when set, a source in a tenant's namespace replicates " +
			"only within its tenant and into namespaces whose cmsync.io/accept-from accepts its namespace.",
	}
)

// All are the policy flags, in the order they are documented.
var All = []Flag{Namespaces, ExcludeNamespaces, SourceNamespaces, MaxReplicatedBytes, ReservedNames, TenantLabel}

// The controller's flags that say which kinds and explicit forms it runs at all. internal/startup
// binds them (its tests check that names and defaults agree); kubectl cmsync reads
// them because a copy taken over into a kind or form the controller does not run would
// be a replica that no controller keeps.
var (
	Secrets       = Flag{"secrets", modeDisabled, "Replicate labelled Secrets too: enabled or disabled."}
	ConfigMapSync = Flag{"configmapsync", modeAuto, "Run the ConfigMapSync controller: auto, enabled or disabled."}
	SecretSync    = Flag{"secretsync", modeAuto, "Run the SecretSync controller (with --secrets=enabled): auto, enabled or disabled."}
	ObjectKinds   = Flag{"object-kinds", "", "Kinds an ObjectSync may copy: a comma list of group/version/Kind; empty: none."}
)

// The values of the Kinds flags.
const (
	modeAuto     = "auto"
	modeEnabled  = "enabled"
	modeDisabled = "disabled"
)

// Kinds are the flags that say which kinds and forms the controller runs (Runs).
var Kinds = []Flag{Secrets, ConfigMapSync, SecretSync, ObjectKinds}

// BoolFlags are the controller's flags that take no value of their own ("--leader-elect",
// never "--leader-elect true"): FromArgs must know them to tell a flag's value from the
// argument after it. internal/startup's tests check the list against the controller's flag set.
var BoolFlags = []string{"leader-elect", "metrics-secure", "profiling", "zap-devel"}

// Values are the policy flags' values by name (and the Kinds flags', where read).
type Values map[string]string

// Defaults are the values of the flags (All and Kinds) when none is given.
func Defaults() Values {
	v := Values{}
	for _, f := range slices.Concat(All, Kinds) {
		v[f.Name] = f.Default
	}
	return v
}

// FromArgs reads the flags of All and Kinds from a controller's arguments as its flag
// package (Go's flag.Parse) reads them: "-name" and "--name" alike, "--name=value" or
// "--name value" (but for BoolFlags), the last of repeated flags wins, and parsing stops
// at "--" or at the first argument that is no flag. Flags not given keep their
// defaults. An error says why the arguments are ones the controller would not start
// with, or ones whose values cannot be known from them: Kubernetes replaces $(VAR) in a
// container's arguments with its environment, which the arguments alone do not say.
func FromArgs(args []string) (Values, error) {
	v := Defaults()
	args = slices.Clone(args)
	for i, arg := range args {
		if strings.Contains(strings.ReplaceAll(arg, "$$", ""), "$(") {
			return nil, fmt.Errorf("argument %q refers to the container's environment ($(VAR)): its value cannot be told from the arguments", arg)
		}
		args[i] = strings.ReplaceAll(arg, "$$", "$") // Kubernetes' escape of a literal $
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if len(arg) < 2 || arg[0] != '-' || arg == "--" {
			break
		}
		name := strings.TrimPrefix(arg[1:], "-")
		if name == "" || name[0] == '-' || name[0] == '=' {
			return nil, fmt.Errorf("bad flag syntax: %s", arg)
		}
		name, value, hasValue := strings.Cut(name, "=")
		if slices.Contains(BoolFlags, name) {
			continue
		}
		if !hasValue {
			if i+1 == len(args) {
				return nil, fmt.Errorf("flag needs an argument: %s", arg)
			}
			i++
			value = args[i]
		}
		if _, wanted := v[name]; wanted {
			v[name] = value
		}
	}
	return v, nil
}

// Bind defines the policy flags on fs; the values are read once fs is parsed.
func Bind(fs *flag.FlagSet) func() Values {
	bound := map[string]*string{}
	for _, f := range All {
		bound[f.Name] = fs.String(f.Name, f.Default, f.Usage)
	}
	return func() Values {
		v := Values{}
		for name, value := range bound {
			v[name] = *value
		}
		return v
	}
}

// Policy parses the values; an error names the flag and what is wrong.
func (v Values) Policy() (desired.Policy, error) {
	scope, err := desired.ParseScope(v[Namespaces.Name])
	if err != nil {
		return desired.Policy{}, fmt.Errorf("--%s: %w", Namespaces.Name, err)
	}
	exclude, err := desired.ParseGlobList(v[ExcludeNamespaces.Name])
	if err != nil {
		return desired.Policy{}, fmt.Errorf("--%s: %w", ExcludeNamespaces.Name, err)
	}
	sources, err := desired.ParseGlobList(v[SourceNamespaces.Name])
	if err != nil {
		return desired.Policy{}, fmt.Errorf("--%s: %w", SourceNamespaces.Name, err)
	}
	budget, err := resource.ParseQuantity(v[MaxReplicatedBytes.Name])
	if err != nil || budget.Sign() < 0 {
		return desired.Policy{}, fmt.Errorf("--%s=%q: a non-negative quantity such as 1Gi or 500Mi", MaxReplicatedBytes.Name, v[MaxReplicatedBytes.Name])
	}
	reserved, err := desired.ParseReservedNames(v[ReservedNames.Name])
	if err != nil {
		return desired.Policy{}, fmt.Errorf("--%s: %w", ReservedNames.Name, err)
	}
	tenantLabel, err := desired.ParseTenantLabel(v[TenantLabel.Name])
	if err != nil {
		return desired.Policy{}, fmt.Errorf("--%s: %w", TenantLabel.Name, err)
	}
	return desired.Policy{
		ExcludeNamespaces: exclude, SourceNamespaces: sources, MaxReplicatedBytes: budget.Value(),
		ReservedNames: reserved, TenantLabel: tenantLabel, Scope: scope,
	}, nil
}

// Runs says which kinds and explicit forms the controller runs.
type Runs struct {
	// Secrets: it replicates Secrets (--secrets=enabled).
	Secrets bool
	// ConfigMapSyncs, SecretSyncs: it runs the explicit form's controller (not
	// --configmapsync=disabled; SecretSync also needs Secrets). "auto" counts as
	// running: the form's objects exist only where its CRD is installed, and cmsync
	// starts the form's controller once it is.
	ConfigMapSyncs, SecretSyncs bool
}

// ObjectKinds parses --object-kinds as the controller does: the kinds an ObjectSync may
// name, before the API server is asked what it serves of them.
func (v Values) ObjectKinds() ([]schema.GroupVersionKind, error) {
	return desired.ParseObjectKinds(v[ObjectKinds.Name])
}

// Runs parses the Kinds flags as the controller checks them; an error names the flag.
func (v Values) Runs() (Runs, error) {
	secrets := v[Secrets.Name]
	if secrets != modeEnabled && secrets != modeDisabled {
		return Runs{}, fmt.Errorf("--%s=%q: must be enabled or disabled", Secrets.Name, secrets)
	}
	for _, f := range []Flag{ConfigMapSync, SecretSync} {
		if mode := v[f.Name]; mode != modeAuto && mode != modeEnabled && mode != modeDisabled {
			return Runs{}, fmt.Errorf("--%s=%q: must be auto, enabled or disabled", f.Name, mode)
		}
	}
	if v[SecretSync.Name] == modeEnabled && secrets != modeEnabled {
		return Runs{}, fmt.Errorf("--%s=enabled: SecretSync replicates Secrets, it needs --%s=enabled", SecretSync.Name, Secrets.Name)
	}
	return Runs{
		Secrets:        secrets == modeEnabled,
		ConfigMapSyncs: v[ConfigMapSync.Name] != modeDisabled,
		SecretSyncs:    secrets == modeEnabled && v[SecretSync.Name] != modeDisabled,
	}, nil
}
