// Package measure reads what the bench measures: the API server's audit log (when
// each write was received and completed, and whose it was), the CPU clocks and
// memory of the processes on this machine (procfs and the kernel's per-process CPU
// clocks), and the API server's and cmsync's metrics in Prometheus' text format.
package measure
