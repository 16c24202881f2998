//go:build linux

package readerr

import (
	"fmt"
	"os"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// A Log counts every input by reason and keeps the first of each for the log line; Take
// hands them over once.
func TestLogCountsByReasonUntilTaken(t *testing.T) {
	var l Log
	for i := 0; i < 1000; i++ {
		l.Add(fmt.Sprintf("/c%d", i), &os.PathError{Op: "open", Path: "/c", Err: os.ErrPermission})
	}
	if r := l.Add("/stuck", procread.ErrTimeout); r != "timeout" {
		t.Errorf("reason %q, want timeout", r)
	}
	got := l.Take()
	if len(got) != 2 || got[0].Reason != "permission" || got[0].Count != 1000 || got[0].Subject != "/c0" ||
		got[1].Reason != "timeout" || got[1].Count != 1 || got[1].Subject != "/stuck" {
		t.Fatalf("Take = %+v", got)
	}
	if again := l.Take(); len(again) != 0 {
		t.Errorf("second Take = %+v, want nothing", again)
	}
}
