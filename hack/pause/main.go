// Command pause is the node's Pod sandbox process: it holds the Pod's namespaces open
// and does nothing else until it is told to stop. A stand-in for registry.k8s.io/pause,
// which cannot be pulled on machines without a registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	// As PID 1 of the sandbox, reap children re-parented to us.
	signal.Ignore(syscall.SIGCHLD)
	<-stop
}
