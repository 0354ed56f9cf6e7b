// Command kubectl-cmsync is cmsync's kubectl plugin (`kubectl cmsync
// status|explain|preview|migrate|version`). It only wires; the commands are in
// internal/cli.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/cmsync/cmsync/internal/cli"
)

// version is set at link time by make plugin-dist (-ldflags -X main.version=vX.Y.Z);
// empty, the plugin reports the version the Go toolchain recorded.
var version string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := cli.NewCommand(os.Stdout, version).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
