package startup

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/cmsync/cmsync/internal/policyflags"
)

func TestClientRateLimit(t *testing.T) {
	for _, tc := range []struct {
		qps       float64
		burst     int
		wantQPS   float32
		wantBurst int
	}{
		{0, 2000, -1, 0},  // the default: no client-side limit (client-go's 0 would be 5/s)
		{-3, 2000, -1, 0}, // negative, as client-go reads it: none
		{50, 10, 50, 10},  // a positive limit is kept with its burst
		{0.5, 1, 0.5, 1},  // fractions are client-go's too
		{500, 2000, 500, 2000},
	} {
		qps, burst := clientRateLimit(tc.qps, tc.burst)
		if qps != tc.wantQPS || burst != tc.wantBurst {
			t.Errorf("clientRateLimit(%v, %d) = %v, %d; want %v, %d", tc.qps, tc.burst, qps, burst, tc.wantQPS, tc.wantBurst)
		}
	}
}

// A malformed policy flag stops cmsync at start, before it connects, with a message
// naming the flag and what is wrong.
func TestMalformedPolicyFlagsStopTheStart(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"--reserved-names=Bad_Name", `--reserved-names: entry "Bad_Name" is not an object name`},
		{"--reserved-names=ca-*", `--reserved-names: entry "ca-*" is not an object name`},
		{"--tenant-label=a b", `--tenant-label: "a b" is not a label key`},
		{"--exclude-namespaces=[x", `--exclude-namespaces: entry "[x"`},
		{"--namespaces=team-*", `--namespaces: entry "team-*" is a glob: list each namespace by name`},
		{"--namespaces=Team", `--namespaces: entry "Team" is not a namespace name`},
	} {
		fs := flag.NewFlagSet("cmsync", flag.ContinueOnError)
		o := BindFlags(fs)
		if err := fs.Parse([]string{tc.arg}); err != nil {
			t.Fatal(err)
		}
		_, err := o.replicatorOptions()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.arg, err, tc.want)
		}
	}
	fs := flag.NewFlagSet("cmsync", flag.ContinueOnError)
	o := BindFlags(fs)
	if err := fs.Parse([]string{"--reserved-names=istio-ca-root-cert, openshift-service-ca.crt", "--tenant-label=capsule.clastix.io/tenant"}); err != nil {
		t.Fatal(err)
	}
	options, err := o.replicatorOptions()
	if err != nil || options.Policy.TenantLabel != "capsule.clastix.io/tenant" || len(options.Policy.ReservedNames) != 2 {
		t.Errorf("valid flags: %+v %v", options.Policy, err)
	}
}

// kubectl cmsync reads the controller's flags from its Deployment's arguments
// (policyflags.FromArgs): it must read them as this flag set does — the same defaults,
// the same flags without a value, the same value for every argument list.
func TestThePluginReadsTheFlagsAsTheControllerDoes(t *testing.T) {
	fs := flag.NewFlagSet("cmsync", flag.ContinueOnError)
	BindFlags(fs)
	var bools []string
	fs.VisitAll(func(f *flag.Flag) {
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			bools = append(bools, f.Name)
		}
	})
	if !slices.Equal(slices.Sorted(slices.Values(bools)), slices.Sorted(slices.Values(policyflags.BoolFlags))) {
		t.Errorf("the controller's flags without a value are %v, policyflags.BoolFlags says %v", bools, policyflags.BoolFlags)
	}
	read := slices.Concat(policyflags.All, policyflags.Kinds)
	for _, f := range read {
		if bound := fs.Lookup(f.Name); bound == nil || bound.DefValue != f.Default {
			t.Errorf("policyflags.%s: --%s default %q, the controller's %+v", f.Name, f.Name, f.Default, bound)
		}
	}
	for _, args := range [][]string{
		nil,
		{"--exclude-namespaces=kube-system", "--exclude-namespaces="},
		{"--leader-elect", "--exclude-namespaces", "a,b", "-tenant-label=t", "--zap-devel", "--secrets=enabled"},
		{"--metrics-bind-address", ":8080", "--reserved-names", "x", "--namespaces=a"},
		{"--leader-elect=true", "--source-namespaces=p-*", "--", "--exclude-namespaces="},
		{"--profiling", "positional", "--exclude-namespaces="},
		{"--exclude-namespaces=", "--metrics-secure", "--configmapsync", "disabled", "-secretsync=enabled"},
		{"--max-replicated-bytes=2Gi", "-"},
		{"--exclude-namespaces"},
		{"---exclude-namespaces=x"},
		{"--=x"},
	} {
		fs := flag.NewFlagSet("cmsync", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		BindFlags(fs)
		parseErr := fs.Parse(args)
		values, err := policyflags.FromArgs(args)
		if (parseErr == nil) != (err == nil) {
			t.Errorf("%q: the controller's parse %v, the plugin's %v", args, parseErr, err)
			continue
		}
		for _, f := range read {
			if err == nil && values[f.Name] != fs.Lookup(f.Name).Value.String() {
				t.Errorf("%q: --%s is %q to the controller, %q to the plugin", args, f.Name, fs.Lookup(f.Name).Value.String(), values[f.Name])
			}
		}
	}
}

// --object-kinds is parsed before cmsync connects: a malformed list stops the start
// naming the flag and the entry; a good one reaches the controllers as kinds.
func TestObjectKindsFlag(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"--object-kinds=NetworkPolicy", `--object-kinds entry "NetworkPolicy": write group/version/Kind`},
		{"--object-kinds=v1/ConfigMap", `--object-kinds entry "v1/ConfigMap": ConfigMaps are copied by`},
		{"--object-kinds=networking.k8s.io/v1/networkpolicies", `kind "networkpolicies"`},
	} {
		fs := flag.NewFlagSet("cmsync", flag.ContinueOnError)
		o := BindFlags(fs)
		if err := fs.Parse([]string{tc.arg}); err != nil {
			t.Fatal(err)
		}
		if _, err := o.replicatorOptions(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.arg, err, tc.want)
		}
	}
	for args, want := range map[string]int{"": 0, "--object-kinds=networking.k8s.io/v1/NetworkPolicy,v1/LimitRange": 2} {
		fs := flag.NewFlagSet("cmsync", flag.ContinueOnError)
		o := BindFlags(fs)
		if err := fs.Parse(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		options, err := o.replicatorOptions()
		if err != nil || len(options.ObjectKinds) != want {
			t.Errorf("%q: %v kinds, %v; want %d", args, options.ObjectKinds, err, want)
		}
	}
}
