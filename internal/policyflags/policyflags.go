// Package policyflags declares, once, the controller's flags that make its policy
// (desired.Policy): where sources may live, where replicas may go, what they may weigh,
// which names are never written, the tenant boundary and the namespaces cmsync serves. The controller binds them;
// kubectl cmsync reads the same flags from the controller's Deployment, so that both
// decide from one policy with the same defaults.
package policyflags

import (
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cmsync/cmsync/replicator/desired"
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

// Values are the policy flags' values by name.
type Values map[string]string

// Defaults are the values of the flags when none is given.
func Defaults() Values {
	v := Values{}
	for _, f := range All {
		v[f.Name] = f.Default
	}
	return v
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
