// Package workload is what the bench does to the cluster: the sources, LIMIT's
// replica-shaped objects (ConfigMaps or Secrets), the plain client's parallel writes,
// and cmsync run as a process of its own.
package workload
