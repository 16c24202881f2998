package procstatus

import (
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

func TestParse(t *testing.T) {
	st := Parse([]byte("Name:\tjava\nUid:\t1000\t1001\t1001\t1001\nNSpid:\t4242\t17\t1\nThreads:\t31\nRssAnon:\t  2048 kB\nCpus_allowed_list:\t0-3,8,10-11\n"), 4242)
	if st.NSPid != 1 || st.UID != 1001 || st.Affinity != 7 || st.AffinityErr != nil || st.Threads != 31 || st.RssAnon != 2<<20 {
		t.Errorf("%+v", st)
	}
	if st := Parse([]byte("Name:\tjava\nCpus_allowed_list:\t3-1\n"), 5); st.NSPid != 5 || st.UID != -1 || st.Affinity != 0 || st.AffinityErr == nil {
		t.Errorf("defaults: %+v", st)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("NSpid:\t4242\t1\nUid:\t0\t0\t0\t0\nCpus_allowed_list:\t0-3,8\n"), 1)
	f.Add([]byte("NSpid:\nCpus_allowed_list:\t5-1,-,\nRssAnon: x kB\n"), 1)
	f.Fuzz(func(t *testing.T, b []byte, pid int) {
		if len(b) > MaxSize {
			return // the read's cap: status is kernel text, a line converted to a string at most
		}
		var st Status
		testutil.AllocBound(t, MaxSize+16<<10, func() { st = Parse(b, pid) })
		if st.Affinity < 0 {
			t.Fatalf("negative affinity %d", st.Affinity)
		}
	})
}
