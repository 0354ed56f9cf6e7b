// Command printfile prints each file named by its arguments, whole, each time its
// content changes (looked at twice a second). The kind suite runs it in Pods that mount
// replicas, to show in the container's log what the kubelet put in the volumes.
package main

import (
	"bytes"
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: printfile FILE...")
		os.Exit(2)
	}
	files := os.Args[1:]
	last := make([][]byte, len(files))
	for {
		for i, file := range files {
			content, err := os.ReadFile(file)
			switch {
			case err != nil:
				fmt.Fprintln(os.Stderr, err)
			case !bytes.Equal(content, last[i]):
				fmt.Printf("--- %s\n%s\n", file, content)
				last[i] = content
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
}
