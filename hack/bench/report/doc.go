// Package report holds the bench's results: the figures of each subcommand as saved
// in JSON (bench/results), their medians over rounds, the tables printed at the end
// of a run, and the plots of a sweep.
package report
