package startup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// loadConfig follows SPEC §4's order: --kubeconfig, else in-cluster, else $KUBECONFIG,
// else ~/.kube/config. The kubeconfig files and $KUBECONFIG are real, read by clientcmd
// as cmsync reads them; "not in a cluster" is client-go's own rest.InClusterConfig
// with KUBERNETES_SERVICE_HOST unset. Two stand-ins: "in a cluster" is one for
// rest.InClusterConfig, as the real one reads the service account's token from a fixed
// path (/var/run/secrets/kubernetes.io/serviceaccount) a test cannot point elsewhere;
// and ~/.kube/config is the test's directory's (homeIn), as clientcmd fixes the home
// file's path when the process starts.
func TestLoadConfigOrder(t *testing.T) {
	inACluster := func() (*rest.Config, error) { return &rest.Config{Host: "https://in-cluster"}, nil }
	serviceAccountUnreadable := func() (*rest.Config, error) { return nil, errors.New("open token: permission denied") }
	for _, tc := range []struct {
		name      string
		flag      string // --kubeconfig: "file" names a kubeconfig, "missing" a path with none
		inCluster func() (*rest.Config, error)
		env, home bool // $KUBECONFIG names a file; ~/.kube/config exists
		want      string
		wantErr   []string
	}{
		{name: "--kubeconfig before everything", flag: "file", inCluster: inACluster, env: true, home: true, want: "https://flag"},
		{name: "in-cluster before $KUBECONFIG", inCluster: inACluster, env: true, home: true, want: "https://in-cluster"},
		{name: "$KUBECONFIG outside a cluster", inCluster: rest.InClusterConfig, env: true, home: true, want: "https://env"},
		{name: "~/.kube/config last", inCluster: rest.InClusterConfig, home: true, want: "https://home"},
		{name: "a Pod whose service account cannot be read", inCluster: serviceAccountUnreadable, env: true, want: "https://env"},
		{
			name: "nothing", inCluster: rest.InClusterConfig,
			wantErr: []string{"no in-cluster config", "KUBERNETES_SERVICE_HOST", "no usable kubeconfig ($KUBECONFIG, else ~/.kube/config)"},
		},
		{name: "--kubeconfig naming no file", flag: "missing", inCluster: inACluster, env: true, wantErr: []string{"--kubeconfig ", "missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			t.Setenv(clientcmd.RecommendedConfigPathEnvVar, "")
			explicit := ""
			switch tc.flag {
			case "file":
				explicit = writeKubeconfig(t, filepath.Join(dir, "flag"), "https://flag")
			case "missing":
				explicit = filepath.Join(dir, "missing")
			}
			if tc.env {
				t.Setenv(clientcmd.RecommendedConfigPathEnvVar, writeKubeconfig(t, filepath.Join(dir, "env"), "https://env"))
			}
			if tc.home {
				writeKubeconfig(t, filepath.Join(dir, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName), "https://home")
			}
			cfg, err := loadConfig(explicit, tc.inCluster, homeIn(defaultLoadingRules(), dir))
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("got %s, want an error", cfg.Host)
				}
				for _, fragment := range tc.wantErr {
					if !strings.Contains(err.Error(), fragment) {
						t.Errorf("error %q does not say %q", err, fragment)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.want {
				t.Errorf("the cluster at %s, want %s", cfg.Host, tc.want)
			}
		})
	}
}

// homeIn is rules with the test's home directory's kubeconfig in place of the user's.
func homeIn(rules *clientcmd.ClientConfigLoadingRules, home string) *clientcmd.ClientConfigLoadingRules {
	for i, path := range rules.Precedence {
		if path == clientcmd.RecommendedHomeFile {
			rules.Precedence[i] = filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
		}
	}
	return rules
}

// writeKubeconfig writes at path a kubeconfig whose one context is the cluster at
// server, and returns path.
func writeKubeconfig(t *testing.T, path, server string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	kubeconfig := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: server}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {Token: "t"}},
		Contexts:       map[string]*clientcmdapi.Context{"c": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "c",
	}
	if err := clientcmd.WriteToFile(kubeconfig, path); err != nil {
		t.Fatal(err)
	}
	return path
}
