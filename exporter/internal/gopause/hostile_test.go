//go:build linux && amd64

package gopause_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/quota-exporter/quota_exporter/exporter/internal/gopause"
	"github.com/quota-exporter/quota_exporter/exporter/internal/gopause/gopausetest"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

func fileID(t testing.TB, path string) gopause.FileID {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return gopause.FileID{Dev: uint64(st.Dev), Ino: st.Ino}
}

func refusal(err error) string {
	r, _ := gopause.Refusal(err)
	return r
}

// TestAttachLandsOnParsedInode: a process that replaces itself, every few milliseconds, by
// another Go binary (a setuid copy, as a base layer shared with other tenants might hold)
// and back, while it is attached to again and again. Every uprobe the kernel reports (bpf
// link info: the file of its inode) is on the binary that was parsed, never the other;
// attaches that opened the setuid copy are refused; one whose process ran the other binary
// before the probes were in place is detached.
func TestAttachLandsOnParsedInode(t *testing.T) {
	for _, mode := range linkModes {
		t.Run(mode.name, func(t *testing.T) { attachLandsOnParsedInode(t, mode.opts) })
	}
}

func attachLandsOnParsedInode(t *testing.T, opts gopause.Options) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	testutil.CopyFile(t, testutil.BuildGo(t, filepath.Join("testdata", "execloop")), a, 0o755)
	testutil.CopyFile(t, a, b, 0o755|os.ModeSetuid)
	idA, idB := fileID(t, a), fileID(t, b)
	cmd := exec.Command(a, b)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	tr, err := gopause.New(func(gopause.Pause) {}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	outcomes := map[string]int{}
	probes := 0
	exe := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe"
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline) && outcomes["attached"] < 300; {
		// AttachProcess's steps, with a look at the probes while the parsed file is open.
		ex, err := gopause.Open(exe)
		if err != nil {
			if r := refusal(err); r != "" {
				outcomes[r]++
			} else {
				outcomes["vanished"]++ // the exe link of an exec in progress
			}
			continue
		}
		att, err := tr.Attach(cmd.Process.Pid, ex)
		if err != nil {
			ex.Close()
			outcomes["vanished"]++
			continue
		}
		// The kernel names the file each uprobe was created on (bpf link info): the
		// descriptor's /proc/self/fd/N (perf-event uprobes), never a path the process could
		// have changed, or the path of the inode it resolved that to (uprobe_multi links):
		// a's, which this test never replaces.
		files, err := att.Files()
		if err != nil {
			t.Fatalf("link info: %v", err)
		}
		for _, f := range files {
			if id := fileID(t, f); !strings.HasPrefix(f, "/proc/self/fd/") && f != a || id != ex.ID || id != idA {
				t.Errorf("uprobe on %s %+v: parsed %+v; a is %+v, the setuid b %+v", f, id, ex.ID, idA, idB)
			}
			probes++
		}
		if ex.Same(exe) {
			outcomes["attached"]++
		} else {
			outcomes[gopause.ReasonExecuted]++
		}
		att.Close()
		ex.Close()
	}
	t.Logf("outcomes %v, %d uprobes checked; probes left in place %d", outcomes, probes, tr.Probes())
	if outcomes["attached"] == 0 || outcomes[gopause.ReasonSetuid] == 0 {
		t.Errorf("want both attaches and setuid refusals, got %v", outcomes)
	}
	if tr.Probes() != 0 {
		t.Errorf("%d probes counted after every attachment closed", tr.Probes())
	}
}

// TestPrivilegedRefused: setuid, setgid and file-capability executables are never probed.
func TestPrivilegedRefused(t *testing.T) {
	testutil.RequireRoot(t)
	bin := gopausetest.Build(t, "", false)
	tr, err := gopause.New(func(gopause.Pause) {}, gopause.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		mode   os.FileMode
		caps   bool
		reason string
	}{
		{"setuid", 0o755 | os.ModeSetuid, false, gopause.ReasonSetuid},
		{"setgid", 0o755 | os.ModeSetgid, false, gopause.ReasonSetuid},
		{"caps", 0o755, true, gopause.ReasonCapabilities},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name)
			testutil.CopyFile(t, bin, path, c.mode)
			if c.caps {
				// vfs_cap_data revision 2: CAP_NET_BIND_SERVICE permitted.
				capData := binary.LittleEndian.AppendUint32(nil, 0x02000000)
				capData = binary.LittleEndian.AppendUint32(capData, 1<<10)
				capData = append(capData, make([]byte, 12)...)
				if err := unix.Setxattr(path, "security.capability", capData, 0); err != nil {
					testutil.Require(t, false, "cannot set file capabilities here: "+err.Error())
				}
			}
			prog := gopausetest.Start(t, exec.Command(path))
			att, _, err := tr.AttachProcess("/proc", prog.PID)
			if err == nil {
				att.Close()
				t.Fatalf("attached to a %s binary", c.name)
			}
			if refusal(err) != c.reason {
				t.Fatalf("error %v, want refusal %q", err, c.reason)
			}
		})
	}
	if tr.Probes() != 0 {
		t.Errorf("%d probes in place", tr.Probes())
	}
}

// TestCraftedBinariesCapped: a real Go binary whose startTheWorldWithSema is all RET
// instructions (one uprobe each, before the cap) and one whose function table claims
// 100 MiB are refused, the first before any probe is placed.
func TestCraftedBinariesCapped(t *testing.T) {
	bin := gopausetest.Build(t, "", false)
	img, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	tg, err := gopause.Find(bin)
	if err != nil {
		t.Fatal(err)
	}
	var size uint64
	for _, s := range syms {
		if s.Name == gopause.StartSymbol {
			size = s.Size
		}
	}
	rets := append([]byte(nil), img...)
	copy(rets[tg.Start:tg.Start+size], bytes.Repeat([]byte{0xc3}, int(size)))
	dir := t.TempDir()
	retsPath := filepath.Join(dir, "rets")
	if err := os.WriteFile(retsPath, rets, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = gopause.Find(retsPath)
	t.Logf("%d-byte %s of RETs: %v", size, gopause.StartSymbol, err)
	if refusal(err) != gopause.ReasonTooManyProbes {
		t.Errorf("all-RET function: %v, want refusal %q", err, gopause.ReasonTooManyProbes)
	}

	// Stripped (no symbol table): the functions come from .gopclntab, whose header now
	// claims 100 MiB.
	stripped := gopausetest.Build(t, "", true)
	img, err = os.ReadFile(stripped)
	if err != nil {
		t.Fatal(err)
	}
	f, err = elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	shoff := binary.LittleEndian.Uint64(img[0x28:])
	for i, s := range f.Sections {
		if s.Name == ".gopclntab" {
			binary.LittleEndian.PutUint64(img[shoff+uint64(i)*64+32:], 100<<20) // sh_size
		}
	}
	bigPath := filepath.Join(dir, "bigtable")
	if err := os.WriteFile(bigPath, img, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err = gopause.Find(bigPath); refusal(err) != "table_too_large" {
		t.Errorf("100 MiB .gopclntab: %v, want refusal table_too_large", err)
	}
}

// TestNodeProbeCap: with room for one process's probes, the second is refused until the
// first is detached.
func TestNodeProbeCap(t *testing.T) {
	testutil.RequireRoot(t)
	bin := gopausetest.Build(t, "", false)
	p1, p2 := gopausetest.Start(t, exec.Command(bin)), gopausetest.Start(t, exec.Command(bin))
	tr, err := gopause.New(func(gopause.Pause) {}, gopause.Options{MaxProbes: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	a1, _, err := tr.AttachProcess("/proc", p1.PID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tr.AttachProcess("/proc", p2.PID); refusal(err) != gopause.ReasonNodeProbeLimit {
		t.Fatalf("second process with %d probes in place: %v, want %s", tr.Probes(), err, gopause.ReasonNodeProbeLimit)
	}
	a1.Close()
	a2, _, err := tr.AttachProcess("/proc", p2.PID)
	if err != nil {
		t.Fatalf("after the first detached: %v", err)
	}
	a2.Close()
}

// TestFloodDoesNotStarveOthers: one process stops the world back to back as fast as it can
// while another stops it 50 times a second; with a budget of 300 pauses per second and
// process, the flooder's pauses beyond it are dropped in the kernel and every pause of the
// other arrives (its count equals its own runtime's exactly).
func TestFloodDoesNotStarveOthers(t *testing.T) {
	testutil.RequireRoot(t)
	bin := gopausetest.Build(t, "", false)
	flooder, victim := gopausetest.Start(t, exec.Command(bin)), gopausetest.Start(t, exec.Command(bin))
	var mu sync.Mutex
	got := map[int]int{}
	const budget = 300
	tr, err := gopause.New(func(p gopause.Pause) {
		mu.Lock()
		got[p.PID]++
		mu.Unlock()
	}, gopause.Options{PausesPerSecond: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// The kernel's run-time statistics of the programs: what the budget check costs per pause.
	if stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		defer stats.Close()
		defer func() {
			for name, p := range gopause.ProgramsOf(tr) {
				if st, err := p.Stats(); err == nil && st.RunCount > 0 {
					t.Logf("BPF %s: %d runs, %v each", name, st.RunCount, st.Runtime/time.Duration(st.RunCount))
				}
			}
		}()
	}
	for _, p := range []*gopausetest.Prog{flooder, victim} {
		a, _, err := tr.AttachProcess("/proc", p.PID)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
	}
	before := victim.Pauses(t)
	floodBefore := flooder.Pauses(t)
	start := time.Now()
	done := make(chan time.Duration)
	go func() { done <- flooder.STW(t, 20000) }()
	victim.Work(t, 3*time.Second, 50)
	per := <-done
	elapsed := time.Since(start)
	after, floodAfter := victim.Pauses(t), flooder.Pauses(t)
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	gotV, gotF := got[victim.PID], got[flooder.PID]
	mu.Unlock()
	own := after["gc"].Sub(before["gc"]).Count() + after["other"].Sub(before["other"]).Count()
	flooded := floodAfter["gc"].Sub(floodBefore["gc"]).Count() + floodAfter["other"].Sub(floodBefore["other"]).Count()
	t.Logf("%v: flooder made %d pauses (%v each), %d delivered; victim made %d, %d delivered; limited %d, lost %d",
		elapsed.Round(time.Millisecond), flooded, per, gotF, own, gotV, tr.Limited(), tr.Lost())
	if uint64(gotV) != own {
		t.Errorf("victim: %d pauses delivered, its runtime counted %d", gotV, own)
	}
	if maxF := budget * (int(elapsed.Seconds()) + 2); gotF > maxF {
		t.Errorf("flooder: %d pauses delivered in %v, budget allows %d", gotF, elapsed, maxF)
	}
	if tr.Limited() == 0 || tr.Lost() != 0 {
		t.Errorf("limited %d (want > 0), lost %d (want 0)", tr.Limited(), tr.Lost())
	}
}

// BenchmarkOpenChecks: what opening once and checking cost next to parsing: Open (open,
// fstat, the capability xattr, parse) against FindIn alone on an open file; AttachProcess
// adds one stat of /proc/<pid>/exe.
func BenchmarkOpenChecks(b *testing.B) {
	bin := gopausetest.Build(b, "", false)
	b.Run("Open", func(b *testing.B) {
		for b.Loop() {
			ex, err := gopause.Open(bin)
			if err != nil {
				b.Fatal(err)
			}
			ex.Close()
		}
	})
	b.Run("FindIn", func(b *testing.B) {
		f, err := os.Open(bin)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		for b.Loop() {
			if _, err := gopause.FindIn(f, st.Size()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("checks", func(b *testing.B) {
		for b.Loop() {
			f, err := os.Open(bin)
			if err != nil {
				b.Fatal(err)
			}
			var st unix.Stat_t
			_ = unix.Fstat(int(f.Fd()), &st)
			_, _ = unix.Fgetxattr(int(f.Fd()), "security.capability", nil)
			_ = unix.Stat(bin, &st)
			f.Close()
		}
	})
}
