package policyflags

import (
	"strings"
	"testing"
)

func TestRuns(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want Runs
		err  string
	}{
		{args: nil, want: Runs{ConfigMapSyncs: true}},
		{args: []string{"--secrets=enabled"}, want: Runs{Secrets: true, ConfigMapSyncs: true, SecretSyncs: true}},
		{args: []string{"--secrets=enabled", "--secretsync=disabled", "--configmapsync=disabled"}, want: Runs{Secrets: true}},
		{args: []string{"--secretsync=auto"}, want: Runs{ConfigMapSyncs: true}},
		{args: []string{"--secrets=true"}, err: `--secrets="true": must be enabled or disabled`},
		{args: []string{"--configmapsync=on"}, err: `--configmapsync="on": must be auto, enabled or disabled`},
		{args: []string{"--secretsync=enabled"}, err: "--secretsync=enabled: SecretSync replicates Secrets, it needs --secrets=enabled"},
	} {
		values, err := FromArgs(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		got, err := values.Runs()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v", tc.args, got, err, tc.want)
		}
	}
}

// FromArgs refuses what cannot be told from the arguments alone (internal/startup's tests check
// it against the controller's own flag set for everything else).
func TestFromArgsRefusesTheEnvironment(t *testing.T) {
	for _, args := range [][]string{{"--exclude-namespaces=$(X)"}, {"$(EXTRA_ARGS)"}, {"--zap-log-level=info", "--tenant-label", "$(T)"}} {
		if _, err := FromArgs(args); err == nil || !strings.Contains(err.Error(), "environment") {
			t.Errorf("%q: %v", args, err)
		}
	}
	if v, err := FromArgs([]string{"--reserved-names=a$$(b)"}); err != nil || v[ReservedNames.Name] != "a$(b)" {
		t.Errorf("an escaped $$( is no reference, and Kubernetes passes it as $(: %v %v", v, err)
	}
}
