// Command cmsync replicates labelled ConfigMaps across namespaces. main only wires:
// flags, logger, the garbage collector's tuning, then internal/startup runs cmsync,
// and starts it again in place when it can serve more than it started with.
package main

import (
	"errors"
	"flag"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cmsync/cmsync/internal/gctune"
	"github.com/cmsync/cmsync/internal/startup"
)

func main() {
	o := startup.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(o.Logger())
	ctx := ctrl.SetupSignalHandler()
	started := make(chan struct{})
	if os.Getenv("GOGC") == "" {
		go gctune.Run(ctx, started)
	}
	err := startup.Run(ctx, *o, func() { close(started) })
	var again startup.StartAgain
	if errors.As(err, &again) {
		again.Exec()
	}
	if err != nil {
		ctrl.Log.WithName("setup").Error(err, "cmsync stopped")
		os.Exit(1)
	}
}
