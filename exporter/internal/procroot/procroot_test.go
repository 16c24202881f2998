package procroot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// jail starts the sleeper chrooted into a new jail and opens its root as the exporter would.
func jail(t *testing.T) (*testutil.Jail, *Root) {
	t.Helper()
	j := testutil.NewJail(t)
	j.Install(t, testutil.Sleeper(t), "bin/sleeper")
	cmd := j.Start(t, "/bin/sleeper", nil)
	r, err := Open("/proc", cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return j, r
}

func TestReadFileStaysInRoot(t *testing.T) {
	j, r := jail(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	j.WriteFile(t, "etc/inside", []byte("tenant"))
	j.WriteFile(t, outside[1:]+"/secret", []byte("tenant's own copy of the path")) // what an absolute link means inside
	j.Symlink(t, filepath.Join(outside, "secret"), "abs")
	rel, _ := filepath.Rel(j.Dir, filepath.Join(outside, "secret"))
	j.Symlink(t, rel, "rel")
	j.Symlink(t, "/proc/1/root"+outside+"/secret", "magic")
	j.Symlink(t, "/etc", "etclink")
	for name, want := range map[string]string{
		"abs":             "tenant's own copy of the path", // followed inside the root
		"rel":             "",                              // ../../.. stops at the root: not found
		"magic":           "",                              // /proc does not exist in the jail
		"etclink/inside":  "tenant",
		"/etclink/inside": "tenant",
	} {
		b, err := r.ReadFile(name, 1<<10)
		if string(b) == "host" {
			t.Fatalf("%s: read the host's file", name)
		}
		if want == "" {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: %q, %v; want not found", name, b, err)
			}
			continue
		}
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", name, b, err, want)
		}
	}
}

// A FIFO, a device and a directory are looked up but never opened for reading; a file above
// the cap is refused whole.
func TestReadFileRegularOnlyAndCapped(t *testing.T) {
	j, r := jail(t)
	j.Mkfifo(t, "fifo")
	if err := unix.Mknod(j.Path("null"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	j.MkdirAll(t, "dir")
	j.WriteFile(t, "big", make([]byte, 2<<10))
	begin := time.Now()
	for _, name := range []string{"fifo", "null", "dir"} {
		if _, err := r.ReadFile(name, 1<<10); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: %v, want ErrNotRegular", name, err)
		}
	}
	if d := time.Since(begin); d > time.Second {
		t.Errorf("took %v: blocked", d)
	}
	if _, err := r.ReadFile("big", 1<<10); !errors.Is(err, ErrTooLarge) {
		t.Errorf("big: %v, want ErrTooLarge", err)
	}
	if b, err := r.ReadFile("big", 4<<10); err != nil || len(b) != 2<<10 {
		t.Errorf("big under a larger cap: %d bytes, %v", len(b), err)
	}
}

func TestReadDirNamesCapped(t *testing.T) {
	j, r := jail(t)
	j.MkdirAll(t, "tmp")
	for i := range 150 {
		if err := os.WriteFile(j.Path(fmt.Sprintf("tmp/f%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names, truncated, err := r.ReadDirNames("/tmp", 100)
	if err != nil || len(names) != 100 || !truncated {
		t.Fatalf("%d names, truncated %v, %v", len(names), truncated, err)
	}
	// A limit above MaxDirEntries is clamped to it (all 150 here).
	names, truncated, err = r.ReadDirNames("/tmp", MaxDirEntries*2)
	if err != nil || len(names) != 150 || truncated {
		t.Fatalf("%d names, truncated %v, %v", len(names), truncated, err)
	}
	j.Mkfifo(t, "notadir")
	if _, _, err := r.ReadDirNames("notadir", 0); !errors.Is(err, unix.ENOTDIR) {
		t.Fatalf("FIFO listed: %v", err)
	}
}
