// Command printfile prints the file named by its argument, whole, each time its
// content changes (looked at twice a second). The real-node suite runs it in a Pod that
// mounts a Secret, to show in the container's log what the kubelet put in the volume.
package main

import (
	"bytes"
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: printfile FILE")
		os.Exit(2)
	}
	var last []byte
	for {
		content, err := os.ReadFile(os.Args[1])
		switch {
		case err != nil:
			fmt.Fprintln(os.Stderr, err)
		case !bytes.Equal(content, last):
			fmt.Printf("--- %s\n%s\n", os.Args[1], content)
			last = content
		}
		time.Sleep(500 * time.Millisecond)
	}
}
