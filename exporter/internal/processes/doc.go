// Package processes is the process source the collectors share: the processes of the
// watched cgroups (one listing per scrape), their runtime detection (JVM, Go) and each
// reader's typed per-process state (Slot). Collectors turn what it found into metrics.
package processes
