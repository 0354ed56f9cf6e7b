package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/policyflags"
	"github.com/cmsync/cmsync/replicator/desired"
)

// options are the flags every command shares: kubectl's connection flags, the output
// format, and overrides of the controller's policy.
type options struct {
	loading   *clientcmd.ClientConfigLoadingRules
	overrides clientcmd.ConfigOverrides
	output    string
	// policy holds the policy flags this command was given, by name: overrides of the
	// controller's (policyflags).
	policy map[string]*string
	flags  *pflag.FlagSet
}

// NewCommand is `kubectl cmsync`.
func NewCommand(out io.Writer) *cobra.Command {
	o := &options{loading: clientcmd.NewDefaultClientConfigLoadingRules()}
	root := &cobra.Command{
		Use:           "kubectl-cmsync",
		Short:         "Inspect cmsync: every source's status, why a namespace has or lacks a replica, what a change would do",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	flags := root.PersistentFlags()
	flags.StringVar(&o.loading.ExplicitPath, "kubeconfig", "", "Path to the kubeconfig file.")
	clientcmd.BindOverrideFlags(&o.overrides, flags, clientcmd.RecommendedConfigOverrideFlags(""))
	flags.StringVarP(&o.output, "output", "o", "", "Output format: json or yaml (default: a table).")
	o.policy, o.flags = map[string]*string{}, flags
	for _, f := range policyflags.All {
		o.policy[f.Name] = flags.String(f.Name, "", fmt.Sprintf("The controller's --%s (default: read from its Deployment; else %q).", f.Name, f.Default))
	}
	root.AddCommand(o.statusCommand(out), o.explainCommand(out), o.previewCommand(out), o.migrateCommand(out))
	return root
}

func (o *options) statusCommand(out io.Writer) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "status [-A | -n NAMESPACE]",
		Short: "Every source (ConfigMaps, Secrets, ConfigMapSyncs, SecretSyncs) with its status, synced/targets, last sync and message",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, namespace, err := o.connect()
			if err != nil {
				return err
			}
			if all {
				namespace = ""
			}
			rows, err := statusRows(cmd.Context(), c, namespace)
			if err != nil {
				return err
			}
			return o.print(out, rows, func(w io.Writer) {
				now := time.Now()
				printf(w, "KIND\tSOURCE\tSTATUS\tSYNCED\tLAST SYNC\tMESSAGE"+"\n")
				for _, r := range rows {
					name := r.Name
					if r.Namespace != "" {
						name = r.Namespace + "/" + r.Name
					}
					printf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Kind, name, r.Status, orDash(r.Synced), age(r.LastSync, now), r.Message)
				}
			})
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "Sources of every namespace.")
	return cmd
}

func (o *options) explainCommand(out io.Writer) *cobra.Command {
	var kind, in string
	var all bool
	cmd := &cobra.Command{
		Use:   "explain NAMESPACE/NAME (--in NAMESPACE | --all)",
		Short: "Why a namespace holds, or lacks, a replica of a source, naming the rule that decided",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (in == "") == !all {
				return fmt.Errorf("give --in NAMESPACE or --all")
			}
			c, _, err := o.connect()
			if err != nil {
				return err
			}
			k, err := kindOf(kind)
			if err != nil {
				return err
			}
			policy, where, err := o.controllerPolicy(cmd.Context(), c)
			if err != nil {
				return err
			}
			e, err := explain(cmd.Context(), c, k, args[0], in, policy)
			if err != nil {
				return err
			}
			e.Policy = where
			return o.print(out, e, func(w io.Writer) {
				if e.Invalid != "" {
					printf(w, "%s is Invalid: %s\ncmsync changes nothing for it until it is fixed.\n", e.Source, e.Invalid)
					return
				}
				printf(w, "%s (controller policy from %s)\n", e.Source, e.Policy)
				printf(w, "NAMESPACE\tREPLICA\tWANTED\tRULE\tNOW"+"\n")
				for _, r := range e.Rows {
					printf(w, "%s\t%s\t%s\t%s\t%s\n", r.Namespace, r.Replica, yesNo(r.Wanted), r.Rule, r.Now)
				}
			})
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "configmap", "The source's kind: configmap, secret, configmapsync or secretsync (the last two: give its NAME alone).")
	cmd.Flags().StringVar(&in, "in", "", "The namespace to explain.")
	cmd.Flags().BoolVar(&all, "all", false, "Explain every namespace.")
	return cmd
}

func (o *options) previewCommand(out io.Writer) *cobra.Command {
	var kind, file string
	var annotations []string
	cmd := &cobra.Command{
		Use:   "preview (-f SOURCE.yaml | NAMESPACE/NAME --set-annotation KEY=VALUE|KEY- ...)",
		Short: "What a change of a source would do: the namespaces that would gain or lose a replica, and the conflicts; writes nothing",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (file == "") == (len(args) == 0) {
				return fmt.Errorf("give -f SOURCE.yaml, or NAMESPACE/NAME with --set-annotation")
			}
			c, _, err := o.connect()
			if err != nil {
				return err
			}
			policy, where, err := o.controllerPolicy(cmd.Context(), c)
			if err != nil {
				return err
			}
			var changed input
			if file != "" {
				changed, err = changedFromFile(cmd.Context(), c, file)
			} else {
				k, kindErr := kindOf(kind)
				if kindErr != nil {
					return kindErr
				}
				changed, err = changedAnnotations(cmd.Context(), c, k, args[0], annotations)
			}
			if err != nil {
				return err
			}
			p, err := previewOf(cmd.Context(), c, changed, policy)
			if err != nil {
				return err
			}
			p.Policy = where
			return o.print(out, p, func(w io.Writer) { printPreview(w, p) })
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "The changed source: a ConfigMap, Secret, ConfigMapSync or SecretSync manifest.")
	cmd.Flags().StringVar(&kind, "kind", "configmap", "The kind of NAMESPACE/NAME: configmap or secret.")
	cmd.Flags().StringArrayVar(&annotations, "set-annotation", nil, "KEY=VALUE to set an annotation, KEY- to remove it (repeatable).")
	return cmd
}

func printPreview(w io.Writer, p Preview) {
	if p.Invalid != "" {
		printf(w, "%s would be Invalid: %s\ncmsync would change nothing and say so in its status.\n", p.Source, p.Invalid)
		return
	}
	outside := ""
	if len(p.Outside) > 0 {
		outside = fmt.Sprintf(", %d outside the tenant", len(p.Outside))
	}
	printf(w, "%s (controller policy from %s): %d replicas gained, %d lost, %d conflicts, %d kept%s\n",
		p.Source, p.Policy, len(p.Gain), len(p.Lose), len(p.Conflicts), p.Kept, outside)
	printf(w, "\tNAMESPACE\tNAME\tWHY"+"\n")
	for _, c := range p.Gain {
		printf(w, "+\t%s\t%s\t%s\n", c.Namespace, c.Name, c.Why)
	}
	for _, c := range p.Lose {
		printf(w, "-\t%s\t%s\t%s\n", c.Namespace, c.Name, c.Why)
	}
	for _, c := range p.Conflicts {
		printf(w, "!\t%s\t%s\tconflict: %s\n", c.Namespace, c.Name, c.Why)
	}
	for _, c := range p.Outside {
		printf(w, "x\t%s\t%s\t%s\n", c.Namespace, c.Name, c.Why)
	}
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
	return cluster{client: c}, namespace, nil
}

// controllerPolicy is the controller's policy: when this command is given any policy
// flag, those flags over the controller's defaults; else read from the cluster.
func (o *options) controllerPolicy(ctx context.Context, c cluster) (desired.Policy, string, error) {
	values, given := policyflags.Defaults(), []string{}
	for _, f := range policyflags.All {
		if o.flags.Changed(f.Name) {
			values[f.Name] = *o.policy[f.Name]
			given = append(given, "--"+f.Name)
		}
	}
	if len(given) == 0 {
		return c.controllerPolicy(ctx)
	}
	p, err := values.Policy()
	return p, "this command's " + strings.Join(given, ", ") + " over the controller's defaults", err
}

// print writes v as JSON or YAML, or as the table table writes.
func (o *options) print(out io.Writer, v any, table func(io.Writer)) error {
	switch strings.ToLower(o.output) {
	case "":
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		table(w)
		return w.Flush()
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		raw, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = out.Write(raw)
		return err
	}
	return fmt.Errorf("-o %q: must be json or yaml", o.output)
}

// printf writes one table line into the tabwriter, whose Flush (returned by print)
// reports any write error.
func printf(w io.Writer, format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
