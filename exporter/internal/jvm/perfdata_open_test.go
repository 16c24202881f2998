package jvm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The perf data directory is the JVM user's: a symlink, a FIFO or a file of another owner
// placed there is not read (the exporter runs as root).
func TestReadPerfDataRefusesUserControlledFiles(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	own := os.Getuid()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, c := range []struct {
		name, path string
		uid        int
	}{{"symlink", link, own}, {"fifo", fifo, own}, {"other owner", secret, own + 1}} {
		b, err := readPerfData(ctx, c.path, c.uid)
		var ue *UnavailableError
		if !errors.As(err, &ue) || ue.Reason != ReasonUnreadable || b != nil {
			t.Errorf("%s: got %q, %v; want unreadable", c.name, b, err)
		}
	}
	if b, err := readPerfData(ctx, secret, own); err != nil || string(b) != "root only" {
		t.Errorf("own regular file: %q, %v", b, err)
	}
}
