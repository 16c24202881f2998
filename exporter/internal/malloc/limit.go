package malloc

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
)

// Sources of an arena limit.
const (
	SourceEnv     = "MALLOC_ARENA_MAX"
	SourceTunable = "GLIBC_TUNABLES"
	SourceDefault = "default" // 8 x online CPUs of the host
)

// arenaLimit returns the most arenas glibc lets pid create, main arena included (compare it
// with State.Arenas+1), and where the value came from; environ is pid's environment, sysfs
// normally "/sys".
//
// glibc rules (malloc/arena.c arena_get2, elf/dl-tunables):
//   - arena_max comes from the glibc.malloc.arena_max tunable, whose env alias is
//     MALLOC_ARENA_MAX. Its minimum is 1: 0 and non-numbers are ignored (default applies).
//     Numbers are read like C (0x hex, leading 0 octal, trailing junk ignored). When both are
//     set, GLIBC_TUNABLES wins (checked here on 2.36, TestArenaLimitPrecedence).
//   - otherwise the limit is 8 x CPUs, but it is only computed once more than arena_test
//     arenas exist (MALLOC_ARENA_TEST / glibc.malloc.arena_test, default 8), so the effective
//     maximum is max(8 x CPUs, arena_test+1): 9 arenas on a 1-CPU mask.
//   - CPUs: online CPUs of the host (/sys/devices/system/cpu/online), not the affinity mask
//     and not the cgroup quota (checked on 2.36 with taskset -c 0: still 8 x online). glibc
//     2.35-2.38 as first released counted the affinity mask instead (__get_nprocs_sched);
//     2.39 went back to online CPUs (BZ 30945) and the fix was backported to the stable
//     branches, so an unpatched 2.35-2.38 can have a lower limit than reported here.
func arenaLimit(ctx context.Context, sysfs string, pid int, environ *environ) (int, string, error) {
	env, err := environ.get()
	if err != nil {
		return 0, "", fmt.Errorf("malloc: pid %d environ: %w", pid, err)
	}
	max, test, src := tunables(env)
	if max > 0 {
		return clampInt(max), src, nil
	}
	n := onlineCPUs(ctx, sysfs)
	if n < 1 {
		n = 2 // glibc's assumption when it cannot tell
	}
	limit := uint64(8 * n)
	if test+1 > limit {
		limit = test + 1
	}
	return clampInt(limit), SourceDefault, nil
}

func clampInt(v uint64) int {
	if v > 1<<31-1 {
		return 1<<31 - 1
	}
	return int(v)
}

// tunables returns arena_max (0 = unset), arena_test and the source of arena_max.
func tunables(env map[string]string) (max, test uint64, src string) {
	test = 8
	if v, ok := parseTunableNum(env["MALLOC_ARENA_MAX"]); ok {
		max, src = v, SourceEnv
	}
	if v, ok := parseTunableNum(env["MALLOC_ARENA_TEST"]); ok {
		test = v
	}
	for _, kv := range strings.Split(env["GLIBC_TUNABLES"], ":") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "glibc.malloc.arena_max":
			if n, ok := parseTunableNum(v); ok {
				max, src = n, SourceTunable
			}
		case "glibc.malloc.arena_test":
			if n, ok := parseTunableNum(v); ok {
				test = n
			}
		}
	}
	return max, test, src
}

// parseTunableNum reads a size_t tunable like glibc's _dl_strtoul and applies minval 1.
func parseTunableNum(s string) (uint64, bool) {
	s = strings.TrimLeft(s, " \t")
	if strings.HasPrefix(s, "-") {
		return 0, false
	}
	s = strings.TrimPrefix(s, "+")
	base := 10
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		base, s = 16, s[2:]
	} else if strings.HasPrefix(s, "0") {
		base = 8
	}
	end := 0
	for end < len(s) && digitVal(s[end]) < base {
		end++
	}
	v, err := strconv.ParseUint(s[:end], base, 64)
	if err != nil || v < 1 {
		return 0, false
	}
	return v, true
}

func digitVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return 99
}

func onlineCPUs(ctx context.Context, sysfs string) int {
	b, err := procread.ReadFile(ctx, filepath.Join(sysfs, "devices/system/cpu/online"), 4096)
	if err != nil {
		return runtime.NumCPU() // best effort; the exporter usually runs on the host
	}
	// 0 when malformed, which makes the limit fall back to glibc's assumption.
	n, _ := kernel.CountCPUList(string(bytes.TrimSpace(b)))
	return n
}
