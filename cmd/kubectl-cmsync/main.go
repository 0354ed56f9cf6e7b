// Command kubectl-cmsync is cmsync's kubectl plugin (`kubectl cmsync status|explain|preview`).
// It only wires; the commands are in internal/cli.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/cmsync/cmsync/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := cli.NewCommand(os.Stdout).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
