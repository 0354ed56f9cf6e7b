package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/internal/policyflags"
)

// options are the flags every command shares: kubectl's connection flags, the output
// format, the cmsync release whose controller's policy the commands decide with, and
// overrides of that policy.
type options struct {
	loading   *clientcmd.ClientConfigLoadingRules
	overrides clientcmd.ConfigOverrides
	output    string
	// controller is the release the policy is read from.
	controller controllerRef
	// policy holds the policy flags this command was given, by name: overrides of the
	// controller's (policyflags).
	policy map[string]*string
	flags  *pflag.FlagSet
}

// rootHelp is kubectl cmsync's help: where it learns the controller's policy, and what
// it does with fewer rights.
const rootHelp = `kubectl cmsync inspects cmsync, and moves another replicator's copies onto it. It
writes nothing, but for migrate --apply.

It decides with the controller's own code, under the controller's policy (the flags
--namespaces, --exclude-namespaces, --source-namespaces, --max-replicated-bytes,
--reserved-names, --tenant-label, and --secrets, --configmapsync, --secretsync, --object-kinds). It reads
them from the cmsync release in --controller-namespace (default cmsync-system): the
Deployment there labelled app.kubernetes.io/name=cmsync and app.kubernetes.io/instance,
as the chart labels it, container cmsync. It reads Deployments in that namespace only
(get and list there suffice) and never believes a Deployment elsewhere, which anyone who
may create Deployments in a namespace of theirs could label so. Every answer says where
its policy came from.

  - More than one release in the namespace: every command refuses until
    --controller-name names the Deployment.
  - No release there, or one you may not read: explain, preview and migrate without
    --apply go on with the binary's defaults (and any policy flags given), and say in
    their answer that this is NOT the controller's policy; migrate --apply refuses.
  - Policy flags given to the plugin replace the release's values for explain, preview
    and migrate without --apply (to try another policy); migrate --apply refuses any
    that would change the controller's.

status reads only what the controller wrote on the sources, and needs no policy.

With the rights to read one namespace only (the view or edit ClusterRole bound there),
every command answers for what that namespace shows, and names each permission it
lacked and what it therefore did not check ("not checked: ... (missing: list namespaces
(cluster-wide))"); migrate --apply refuses a plan made with any such gap.`

// NewCommand is `kubectl cmsync`; version is the one stamped at link time ("": the
// one the Go toolchain recorded, versionOf).
func NewCommand(out io.Writer, version string) *cobra.Command {
	o := &options{loading: clientcmd.NewDefaultClientConfigLoadingRules()}
	root := &cobra.Command{
		Use: "kubectl-cmsync",
		Short: "Inspect cmsync: every source's status, why a namespace has or lacks a replica, what a change would do; " +
			"move another replicator's copies onto it",
		Long:          rootHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	flags := root.PersistentFlags()
	flags.StringVar(&o.loading.ExplicitPath, "kubeconfig", "", "Path to the kubeconfig file.")
	clientcmd.BindOverrideFlags(&o.overrides, flags, clientcmd.RecommendedConfigOverrideFlags(""))
	flags.StringVarP(&o.output, "output", "o", "", "Output format: json or yaml (default: a table).")
	flags.StringVar(&o.controller.namespace, "controller-namespace", DefaultControllerNamespace,
		"Namespace of the cmsync release whose Deployment's flags are the controller's policy (the plugin reads Deployments there, and nowhere else).")
	flags.StringVar(&o.controller.name, "controller-name", "",
		"Name of the release's Deployment in --controller-namespace, where several releases share it (default: the only one there).")
	o.policy, o.flags = map[string]*string{}, flags
	for _, f := range policyflags.All {
		o.policy[f.Name] = flags.String(f.Name, "", fmt.Sprintf(
			"In place of the controller's --%s, read from its release (without one: %q); not with migrate --apply, unless the same.", f.Name, f.Default))
	}
	root.AddCommand(o.statusCommand(out), o.explainCommand(out), o.previewCommand(out), o.migrateCommand(out), o.versionCommand(out, version))
	return root
}

func (o *options) statusCommand(out io.Writer) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "status [-A | -n NAMESPACE]",
		Short: "Every source (ConfigMaps, Secrets, ConfigMapSyncs, SecretSyncs, ObjectSyncs) with its status, synced/targets, last sync and message",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := o.open(cmd, reads)
			if err != nil {
				return err
			}
			namespace := s.namespace
			if all {
				namespace = ""
			}
			rows, err := statusRows(cmd.Context(), s.cluster, namespace)
			if err != nil {
				return err
			}
			return o.print(out, rows, func(w io.Writer) { printStatus(w, rows) })
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "Sources of every namespace.")
	return cmd
}

func printStatus(w io.Writer, rows []StatusRow) {
	now := time.Now()
	printf(w, "KIND\tSOURCE\tSTATUS\tSYNCED\tLAST SYNC\tMESSAGE"+"\n")
	for _, r := range rows {
		name := r.Name
		if r.Namespace != "" {
			name = r.Namespace + "/" + r.Name
		}
		if r.Copies != "" {
			name += " (" + r.Copies + ")"
		}
		printf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Kind, name, r.Status, orDash(r.Synced), age(r.LastSync, now), r.Message)
	}
}

func (o *options) explainCommand(out io.Writer) *cobra.Command {
	var kind, in string
	var all bool
	cmd := &cobra.Command{
		Use:   "explain (NAMESPACE/NAME | osync/NAME) (--in NAMESPACE | --all)",
		Short: "Why a namespace holds, or lacks, a replica of a source, naming the rule that decided",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (in == "") == !all {
				return fmt.Errorf("give --in NAMESPACE or --all")
			}
			k, ref, err := kindAndRef(kind, cmd.Flags().Changed("kind"), args[0])
			if err != nil {
				return err
			}
			s, err := o.open(cmd, decides)
			if err != nil {
				return err
			}
			e, err := explain(cmd.Context(), s, k, ref, in)
			if err != nil {
				return err
			}
			return o.print(out, e, func(w io.Writer) { printExplanation(w, e) })
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "configmap",
		"The source's kind: configmap, secret, configmapsync, secretsync or objectsync (the last three: give its NAME alone, or write KIND/NAME "+
			"without --kind, e.g. osync/default-deny); or, for a replica of an ObjectSync, its kind as --object-kinds writes it "+
			"(networking.k8s.io/v1/NetworkPolicy): the ObjectSync that owns it is explained.")
	cmd.Flags().StringVar(&in, "in", "", "The namespace to explain.")
	cmd.Flags().BoolVar(&all, "all", false, "Explain every namespace.")
	return cmd
}

func printExplanation(w io.Writer, e Explanation) {
	printf(w, "%s (controller policy from %s)\n", e.Source, e.Policy)
	switch {
	case e.Invalid != "":
		printf(w, "Invalid: %s\ncmsync changes nothing for it until it is fixed.\n", desired.OneLine(e.Invalid))
	case e.Inactive != "":
		printf(w, "Not a source: %s.\n", e.Inactive)
	}
	if e.Invalid == "" {
		printf(w, "NAMESPACE\tREPLICA\tWANTED\tRULE\tNOW"+"\n")
		for _, r := range e.Rows {
			printf(w, "%s\t%s\t%s\t%s\t%s\n", r.Namespace, r.Replica, yesNo(r.Wanted), r.Rule, r.Now)
		}
	}
	printNotChecked(w, e.NotChecked)
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
			ref := ""
			if len(args) > 0 {
				ref = args[0]
			}
			k, ref, err := kindAndRef(kind, cmd.Flags().Changed("kind"), ref)
			if err != nil {
				return err
			}
			s, err := o.open(cmd, decides)
			if err != nil {
				return err
			}
			var changed input
			if file != "" {
				changed, err = changedFromFile(cmd.Context(), s.cluster, file, s.controller.objectKinds)
			} else {
				changed, err = changedAnnotations(cmd.Context(), s.cluster, k, ref, annotations)
			}
			if err != nil {
				return err
			}
			p, err := previewOf(cmd.Context(), s, changed)
			if err != nil {
				return err
			}
			return o.print(out, p, func(w io.Writer) { printPreview(w, p) })
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "The changed source: a ConfigMap, Secret, ConfigMapSync, SecretSync or ObjectSync manifest.")
	cmd.Flags().StringVar(&kind, "kind", "configmap", "The kind of NAMESPACE/NAME: configmap or secret.")
	cmd.Flags().StringArrayVar(&annotations, "set-annotation", nil, "KEY=VALUE to set an annotation, KEY- to remove it (repeatable).")
	return cmd
}

func printPreview(w io.Writer, p Preview) {
	defer printNotChecked(w, p.NotChecked)
	if p.Invalid != "" {
		printf(
			w,
			"%s (controller policy from %s) would be Invalid: %s\ncmsync would change nothing and say so in its status.\n",
			p.Source,
			p.Policy,
			desired.OneLine(p.Invalid),
		)
		return
	}
	outside := ""
	if len(p.Outside) > 0 {
		outside = fmt.Sprintf(", %d outside the tenant", len(p.Outside))
	}
	printf(w, "%s (controller policy from %s): %d replicas gained, %d lost, %d conflicts, %d kept%s\n",
		p.Source, p.Policy, len(p.Gain), len(p.Lose), len(p.Conflicts), p.Kept, outside)
	if p.Inactive != "" {
		printf(w, "Not a source: %s.\n", p.Inactive)
	}
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

// kindAndRef reads the kind and the name of the object a command is about: --kind and
// NAMESPACE/NAME (or NAME, for an explicit kind), or, without --kind, kubectl's
// KIND/NAME for an explicit kind (osync/default-deny, cms/ca). Without --kind, a
// NAMESPACE/NAME whose namespace is such a kind's name is read as KIND/NAME: a
// ConfigMap in a namespace named so takes --kind configmap.
func kindAndRef(kindFlag string, kindGiven bool, ref string) (kind, name string, err error) {
	if !kindGiven {
		if prefix, rest, ok := strings.Cut(ref, "/"); ok && !strings.Contains(rest, "/") {
			if k, err := kindOf(prefix); err == nil && newSync(k) != nil {
				return k, rest, nil
			}
		}
	}
	kind, err = kindOf(kindFlag)
	return kind, ref, err
}

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
