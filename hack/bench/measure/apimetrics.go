package measure

import (
	"strconv"
	"strings"
)

// SampleOf is the value of a line of Prometheus' text format if the line is series's
// sample (the series with its labels, exactly as exposed).
func SampleOf(line, series string) (float64, bool) {
	value, ok := strings.CutPrefix(line, series+" ")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseFloat(value, 64)
	return n, err == nil
}

// RequestCounters reads, from a scrape of the API server's /metrics, its request
// counters (apiserver_request_total) summed by verb and resource, a refusal (404, 409,
// 429, ...) counted apart, and the bytes it has allocated so far
// (go_memstats_alloc_bytes_total).
func RequestCounters(raw []byte) (map[string]int, float64) {
	counts := map[string]int{}
	var allocated float64
	for _, line := range strings.Split(string(raw), "\n") {
		if value, ok := SampleOf(line, "go_memstats_alloc_bytes_total"); ok {
			allocated = value
		}
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, _ := strings.Cut(line[len("apiserver_request_total{"):], "} ")
		var verb, resource, code string
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "verb":
				verb = strings.Trim(v, `"`)
			case "resource":
				resource = strings.Trim(v, `"`)
			case "code":
				code = strings.Trim(v, `"`)
			}
		}
		key := verb + " " + resource
		if !strings.HasPrefix(code, "2") {
			key += " " + code // a refusal (404, 409, 429, ...) is counted apart
		}
		n, _ := strconv.ParseFloat(value, 64)
		counts[key] += int(n)
	}
	return counts, allocated
}

// WatchesOf sums, from a scrape of the API server's /metrics, its watches of resource
// in flight (apiserver_longrunning_requests with verb WATCH), of every scope.
func WatchesOf(raw []byte, resource string) int {
	total := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") || !strings.Contains(line, `verb="WATCH"`) ||
			!strings.Contains(line, `resource="`+resource+`"`) {
			continue
		}
		_, value, _ := strings.Cut(line, "} ")
		n, _ := strconv.ParseFloat(value, 64)
		total += int(n)
	}
	return total
}
