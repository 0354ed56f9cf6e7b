// Command netprobe serves HTTP, or probes a URL once a second and prints whether it was
// reached. The kind suite runs it in two Pods of different namespaces to show what a
// NetworkPolicy replicated into one of them lets through:
//
//	netprobe serve :8080
//	netprobe probe http://10.244.1.7:8080/
//
// Each probe opens a new connection (no keep-alive): a network policy decides on a
// connection's first packet, so a connection kept open from before would not show it.
package main

import (
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 3 || (os.Args[1] != "serve" && os.Args[1] != "probe") {
		fmt.Fprintln(os.Stderr, "usage: netprobe serve ADDRESS | netprobe probe URL")
		os.Exit(2)
	}
	if os.Args[1] == "serve" {
		serve(os.Args[2])
	}
	probe(os.Args[2])
}

func serve(address string) {
	server := &http.Server{
		Addr:              address,
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = fmt.Fprintln(w, "served")
		}),
	}
	fmt.Fprintln(os.Stderr, server.ListenAndServe())
	os.Exit(1)
}

// probe prints one line a second: "reached" when url answered 200, "not reached: …"
// otherwise.
func probe(url string) {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		resp, err := client.Get(url)
		switch {
		case err != nil:
			fmt.Println("not reached:", err)
		case resp.StatusCode != http.StatusOK:
			fmt.Println("not reached: status", resp.Status)
		default:
			fmt.Println("reached")
		}
		if resp != nil {
			_ = resp.Body.Close()
		}
		time.Sleep(time.Second)
	}
}
