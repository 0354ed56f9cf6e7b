// Command kubectl is kubectl itself, built from k8s.io/kubectl at the project's pinned
// Kubernetes version, so that the end-to-end suite can run the README's commands
// verbatim on a machine that has no kubectl: the real command, not a copy of its
// behaviour.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	os.Exit(cli.Run(cmd.NewDefaultKubectlCommand()))
}
