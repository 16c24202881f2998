// Package procstatus parses the few fields of /proc/<pid>/status the exporter uses. Process
// discovery reads the file once per scrape and hands the result to every runtime reader.
package procstatus

import (
	"bytes"
	"strconv"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
)

// MaxSize caps a status read (a few KiB in practice).
const MaxSize = 64 << 10

// Status holds the parsed fields.
type Status struct {
	NSPid    int // pid in the innermost pid namespace (last NSpid field); the pid when absent
	UID      int // effective uid; -1 when absent
	Threads  int // Threads: line
	Affinity int // CPUs in Cpus_allowed_list; 0 when absent or malformed
	// AffinityErr is set when Cpus_allowed_list is absent or malformed (kernel.CountCPUList).
	AffinityErr error
	RssAnon     uint64 // RssAnon in bytes
}

// Parse reads status content of process pid; it never fails: absent or malformed fields keep
// their defaults (AffinityErr says so for the affinity).
func Parse(b []byte, pid int) Status {
	st := Status{NSPid: pid, UID: -1, AffinityErr: errNoAffinity}
	for line := range kernel.Lines(b) {
		k, v, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		switch string(k) {
		case "NSpid":
			if f, ok := field(v, -1); ok {
				if n, err := strconv.Atoi(string(f)); err == nil {
					st.NSPid = n
				}
			}
		case "Uid":
			if f, ok := field(v, 1); ok {
				if n, err := strconv.Atoi(string(f)); err == nil {
					st.UID = n
				}
			}
		case "Threads":
			st.Threads, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		case "Cpus_allowed_list":
			st.Affinity, st.AffinityErr = kernel.CountCPUList(string(v))
		case "RssAnon":
			if f, ok := field(v, 0); ok {
				if kb, err := strconv.ParseUint(string(f), 10, 54); err == nil {
					st.RssAnon = kb << 10
				}
			}
		}
	}
	return st
}

// field returns the i-th whitespace-separated field of v (i < 0: the last), without
// splitting v into a slice of fields.
func field(v []byte, i int) ([]byte, bool) {
	var last []byte
	n := 0
	for f := range bytes.FieldsSeq(v) {
		if n == i {
			return f, true
		}
		last = f
		n++
	}
	return last, i < 0 && n > 0
}

var errNoAffinity = &noAffinityError{}

type noAffinityError struct{}

func (*noAffinityError) Error() string { return "no Cpus_allowed_list" }
