package cli

import (
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is `kubectl cmsync version`'s answer.
type Version struct {
	Version string `json:"version"`
}

func (o *options) versionCommand(out io.Writer, stamped string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "The plugin's version; reads nothing from the cluster",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := Version{Version: versionOf(stamped)}
			return o.print(out, v, func(w io.Writer) { printf(w, "kubectl-cmsync %s\n", v.Version) })
		},
	}
}

// versionOf is the version stamped at link time (make plugin-dist), else the one the Go
// toolchain recorded: the module's version for `go install …/cmd/kubectl-cmsync@vX.Y.Z`,
// a pseudo-version of the commit for a build in a checkout.
func versionOf(stamped string) string {
	if stamped != "" {
		return stamped
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}
