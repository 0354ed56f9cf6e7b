package workload

import (
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
)

// Parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func Parallel(workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := first.Load().(error); ok {
		return err
	}
	return nil
}

// RetryServerErrors runs write, and again as a plain client would while the API server
// answers with a server error: under 900 KiB writes etcd sometimes answers "request
// timed out", at times after the write landed. A retry answered with an error that
// landed reports (AlreadyExists for a create, NotFound for a delete) means the first
// try landed.
func RetryServerErrors(write func() error, landed func(error) bool) error {
	tried := false
	return retry.OnError(retry.DefaultBackoff, isServerError, func() error {
		err := write()
		if tried && landed != nil && landed(err) {
			return nil
		}
		tried = true
		return err
	})
}

func isServerError(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
}
