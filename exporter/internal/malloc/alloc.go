package malloc

import (
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/quota-exporter/quota_exporter/exporter/internal/elfscan"
	"github.com/quota-exporter/quota_exporter/exporter/internal/execache"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

const maxTasks = 4096 // threads whose names are checked for jemalloc's background threads

// maxDynsym caps the dynamic symbol table scanned for an allocator's API (700 000 symbols;
// an executable exports a few hundred unless linked with -rdynamic). The scan streams it
// (package elfscan) whatever its size: the cap bounds its time, not its memory.
const maxDynsym = 16 << 20

// allocatorSymbols are the dynamic symbols exeAllocator looks for.
var allocatorSymbols = []string{"mallctl", "je_mallctl", "je_malloc", "tc_malloc", "mi_malloc", "malloc", "free"}

// libAllocator names the allocator of a shared-library file name, "" for none.
func libAllocator(name string) string {
	base := path.Base(strings.TrimSuffix(strings.TrimSpace(name), " (deleted)"))
	switch {
	case strings.HasPrefix(base, "libjemalloc.so"), strings.HasPrefix(base, "libjemalloc_"):
		return Jemalloc
	case strings.HasPrefix(base, "libtcmalloc") && strings.Contains(base, ".so"):
		return Tcmalloc
	case strings.HasPrefix(base, "libmimalloc") && strings.Contains(base, ".so"):
		return Mimalloc
	}
	return ""
}

// detectAllocator decides from, in order: a mapped allocator library (what LD_PRELOAD or a
// DT_NEEDED entry loaded), LD_PRELOAD naming one (the initial environment; the library may
// have failed to load, so this only counts when maps cannot tell), an allocator linked into
// the executable (its dynamic symbols export malloc and the allocator's own API), and
// jemalloc background thread names. Otherwise glibc when its libc is mapped, else Other.
//
// Limits: a statically linked allocator in a stripped executable that does not export
// malloc, and statically linked glibc, are not recognized; MALLOC_CONF alone is not
// evidence (it is often set globally).
func detectAllocator(ctx context.Context, dir string, allocLib string, env map[string]string, glibc bool, threadNames func() ([]string, error), exes *execache.Cache[string]) string {
	if allocLib != "" {
		return allocLib
	}
	if !glibc {
		return Other
	}
	for _, p := range strings.FieldsFunc(env["LD_PRELOAD"], func(r rune) bool { return r == ' ' || r == ':' }) {
		if a := libAllocator(p); a != "" {
			return a
		}
	}
	if a := exeAllocator(ctx, filepath.Join(dir, "exe"), exes); a != "" {
		return a
	}
	if jemallocThreads(ctx, dir, threadNames) {
		return Jemalloc
	}
	return Glibc
}

// exeAllocator looks at the executable's dynamic symbol table: a dynamically linked program
// that defines malloc itself exports it (libc's own callers must bind to it). What one
// executable file exports is decided once: cache (nil: none) keeps it by the file's identity.
func exeAllocator(ctx context.Context, exe string, cache *execache.Cache[string]) string {
	a, _ := procread.Do(ctx, func() (string, error) {
		f, err := os.Open(exe)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > elfscan.MaxBinarySize {
			return "", err
		}
		id, known := execache.IDOf(f)
		if known {
			if a, ok := cache.Get(id); ok {
				return a, nil
			}
		}
		a, err := dynamicAllocator(ctx, f)
		if err != nil {
			return "", err
		}
		if known {
			cache.Add(id, a)
		}
		return a, nil
	})
	return a
}

// dynamicAllocator tells the allocator whose API the ELF image r defines and exports, ""
// for none (or no readable dynamic symbol table). Errors are I/O errors.
func dynamicAllocator(ctx context.Context, r io.ReaderAt) (string, error) {
	f, err := elfscan.NewFile(r)
	if errors.Is(err, elfscan.ErrNotELF) || errors.Is(err, elfscan.ErrTooLarge) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	dynsym := f.SectionOfType(elf.SHT_DYNSYM)
	if dynsym == nil || dynsym.Size > maxDynsym {
		return "", nil // no dynamic symbols, or too many to scan: the allocator stays unknown here
	}
	defined := map[string]bool{}
	err = f.Symbols(ctx, dynsym, allocatorSymbols, func(s elfscan.Symbol) bool {
		if s.Defined() && s.Type() == elf.STT_FUNC {
			defined[s.Name] = true
		}
		return len(defined) == len(allocatorSymbols)
	})
	if errors.Is(err, elfscan.ErrNotELF) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	switch {
	case defined["mallctl"] || defined["je_mallctl"] || defined["je_malloc"]:
		return Jemalloc, nil
	case defined["tc_malloc"]:
		return Tcmalloc, nil
	case defined["mi_malloc"]:
		return Mimalloc, nil
	case defined["malloc"] && defined["free"]:
		return Other, nil
	}
	return "", nil
}

// jemallocThreads reports a thread named "jemalloc_bg_thd" (jemalloc with
// background_thread:true; off by default, so absence proves nothing).
func jemallocThreads(ctx context.Context, dir string, threadNames func() ([]string, error)) bool {
	if threadNames != nil {
		names, _ := threadNames()
		for _, n := range names {
			if strings.HasPrefix(n, "jemalloc_bg_thd") {
				return true
			}
		}
		return false
	}
	found, _ := procread.Do(ctx, func() (bool, error) {
		d, err := os.Open(filepath.Join(dir, "task"))
		if err != nil {
			return false, err
		}
		defer d.Close()
		tids, err := d.Readdirnames(maxTasks)
		if err != nil {
			return false, err
		}
		for _, tid := range tids {
			b, err := os.ReadFile(filepath.Join(dir, "task", tid, "comm"))
			if err == nil && strings.HasPrefix(string(b), "jemalloc_bg_thd") {
				return true, nil
			}
		}
		return false, nil
	})
	return found
}
