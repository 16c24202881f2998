// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// Go stop-the-world pauses, timed from outside the process by uprobes on the points where the
// runtime starts and stops its own /sched/pauses/total clock: the entry of
// runtime.stopTheWorldWithSema, and in runtime.startTheWorldWithSema its entry (GC mark
// termination) or its call of wakep (every other pause). Never return probes: they rewrite the return address on the Go stack,
// which the Go runtime walks and moves (iovisor/bcc#1320, golang/go#22008).
// Reads only registers (no kernel structures), so it needs neither CO-RE nor vmlinux.h.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

// The user registers a uprobe sees, and where Go's ABIInternal passes the first integer
// argument: AX on x86-64 (uapi struct pt_regs), R0 on arm64 (uapi struct user_pt_regs, the
// start of the kernel's pt_regs). bpf2go -target defines __TARGET_ARCH_<arch> per object.
#if defined(__TARGET_ARCH_x86)
struct regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};
#define GO_ARG1(ctx) ((ctx)->ax)
#elif defined(__TARGET_ARCH_arm64)
struct regs {
	__u64 regs[31];
	__u64 sp, pc, pstate;
};
#define GO_ARG1(ctx) ((ctx)->regs[0])
#else
#error "gopause: no registers for this target (bpf2go -target amd64 or arm64)"
#endif

struct stop {
	__u64 at;     // bpf_ktime_get_ns at stop entry
	__u32 reason; // stwReason: Go's first integer argument
	__u32 pad;
};

// One finished pause.
struct event {
	__u32 tgid;
	__u32 reason;
	__u64 ns;
};

// Pauses in progress, by process: the runtime stops the world once at a time (worldsema).
// LRU: a process that dies while stopped leaves no entry behind for long.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct stop);
} stops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18);
} events SEC(".maps");

// lost counts pauses the ring buffer had no room for (userspace too slow).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

// limited counts pauses dropped because their process was over its budget.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} limited SEC(".maps");

// Pauses one process may send per second (set by the loader): the ring buffer is shared,
// and a process stopping the world in a loop must not crowd out the others' pauses.
volatile const __u32 budget_per_sec = 2000;

// A process's budget: pauses sent in the second that started at window.
struct budget {
	__u64 window;
	__u32 sent;
	__u32 pad;
};

// LRU, like stops: a process that exits leaves no entry behind for long.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct budget);
} budgets SEC(".maps");

static __always_inline void count(void *map)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(map, &zero);
	if (n)
		*n += 1;
}

// within_budget takes one pause from tgid's budget for the second at now; 0 when spent.
// Pauses of one process are serialised by its runtime (worldsema): no races on the entry.
static __always_inline int within_budget(__u32 tgid, __u64 now)
{
	struct budget *b = bpf_map_lookup_elem(&budgets, &tgid);
	if (!b) {
		struct budget fresh = {.window = now, .sent = 1};
		bpf_map_update_elem(&budgets, &tgid, &fresh, BPF_ANY);
		return 1;
	}
	if (now - b->window >= 1000000000ULL) {
		b->window = now;
		b->sent = 0;
	}
	if (b->sent >= budget_per_sec)
		return 0;
	b->sent++;
	return 1;
}

SEC("uprobe/stop_the_world")
int stop_the_world(struct regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct stop s = {.at = bpf_ktime_get_ns(), .reason = (__u32)(GO_ARG1(ctx) & 0xff)};
	bpf_map_update_elem(&stops, &tgid, &s, BPF_ANY);
	return 0;
}

// finish sends the pause of tgid in progress, if any, as ended at now.
static __always_inline void finish(__u32 tgid, struct stop *s, __u64 now)
{
	if (!within_budget(tgid, now)) {
		count(&limited);
		bpf_map_delete_elem(&stops, &tgid);
		return;
	}
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(&lost);
	} else {
		e->tgid = tgid;
		e->reason = s->reason;
		e->ns = now - s->at;
		bpf_ringbuf_submit(e, 0);
	}
	bpf_map_delete_elem(&stops, &tgid);
}

// stwGCMarkTerm: the runtime stops the clock of a mark termination pause before it calls
// startTheWorldWithSema (gcMarkTermination passes its "now"), so that pause ends at the entry.
#define STW_GC_MARK_TERM 1

SEC("uprobe/start_the_world")
int start_the_world(struct regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct stop *s = bpf_map_lookup_elem(&stops, &tgid);
	if (s && s->reason == STW_GC_MARK_TERM)
		finish(tgid, s, now);
	return 0;
}

// Every other pause ends where startTheWorldWithSema has restarted the world and read its
// clock: at its call of wakep.
SEC("uprobe/world_started")
int world_started(struct regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct stop *s = bpf_map_lookup_elem(&stops, &tgid);
	if (s) // else attached while the world was stopped
		finish(tgid, s, now);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
