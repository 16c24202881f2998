// SPDX-License-Identifier: GPL-2.0
//go:build ignore

/*
 * Lengths of CFS bandwidth stalls, per cgroup.
 *
 * The kernel throttles one cgroup's run queue on one CPU at a time (throttle_cfs_rq, when
 * that cfs_rq runs out of quota and the cgroup's pool is empty) and unthrottles it when the
 * period timer refills the pool (unthrottle_cfs_rq). A cgroup's stall is the interval from
 * the first of its per-CPU run queues being throttled to the last one being unthrottled: a
 * freeze of all its CPUs at once is one stall of the application, not one per CPU (that sum
 * is what cpu.stat's throttled time already gives). Each finished stall goes to user space
 * as (cgroup id, nanoseconds, end time) through a ring buffer.
 *
 * Two entry points per event so that the loader can pick what the kernel allows: fentry and
 * fexit (BPF trampolines, kernel 5.5+ with BTF), or kprobe and kretprobe.
 */

#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char __license[] SEC("license") = "GPL";

/* The cgroup id of each per-CPU run queue seen throttled and not yet unthrottled. Only
 * these are unthrottled here: a run queue throttled before the program was attached does
 * not end a stall it never started. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u64);   /* struct cfs_rq * */
	__type(value, __u64); /* cgroup id */
} throttled_rqs SEC(".maps");

struct cgroup_state {
	__s64 nr_throttled; /* run queues throttled now */
	__u64 start_ns;     /* when the first of them was throttled */
	__u32 max_rqs;      /* the most run queues throttled at once in this stall */
	__u32 pad;
};

/* Per cgroup. LRU: removed cgroups age out without user space having to delete them. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct cgroup_state);
} cgroups SEC(".maps");

struct stall {
	__u64 cgroup_id;
	__u64 ns;     /* length */
	__u64 end_ns; /* CLOCK_MONOTONIC at its end, to align windows with other readings */
	__u32 max_rqs;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} stalls SEC(".maps");

/* Stalls lost: ring buffer full (user space too slow) or a map full. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline void count_lost(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&lost, &zero);
	if (n)
		(*n)++;
}

static __always_inline void throttled(struct cfs_rq *rq)
{
	__u64 key = (__u64)rq;
	__u64 id = BPF_CORE_READ(rq, tg, css.cgroup, kn, id);
	if (bpf_map_update_elem(&throttled_rqs, &key, &id, BPF_NOEXIST))
		return; /* already throttled (not expected), or the map is full */
	struct cgroup_state *st = bpf_map_lookup_elem(&cgroups, &id);
	if (!st) {
		struct cgroup_state fresh = {};
		bpf_map_update_elem(&cgroups, &id, &fresh, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&cgroups, &id);
		if (!st) {
			bpf_map_delete_elem(&throttled_rqs, &key);
			count_lost();
			return;
		}
	}
	/* The first run queue starts the stall. start_ns is written only on this 0 -> 1
	 * step, so the unthrottle that ends the stall reads it while its own run queue still
	 * counts (nr_throttled >= 1): no other CPU can overwrite it then. */
	__s64 before = __sync_fetch_and_add(&st->nr_throttled, 1);
	if (before == 0) {
		st->start_ns = bpf_ktime_get_ns();
		st->max_rqs = 1;
	} else if (before + 1 > st->max_rqs) {
		st->max_rqs = before + 1; /* racy between CPUs; a statistic only */
	}
}

static __always_inline void unthrottled(struct cfs_rq *rq)
{
	__u64 key = (__u64)rq;
	__u64 *v = bpf_map_lookup_elem(&throttled_rqs, &key);
	if (!v)
		return;
	__u64 id = *v;
	if (bpf_map_delete_elem(&throttled_rqs, &key))
		return; /* another CPU took it first */
	struct cgroup_state *st = bpf_map_lookup_elem(&cgroups, &id);
	if (!st)
		return; /* evicted from the LRU: the stall is lost */
	__u64 start = st->start_ns;
	__u32 max_rqs = st->max_rqs;
	if (__sync_fetch_and_add(&st->nr_throttled, -1) != 1)
		return; /* other run queues of the cgroup are still throttled */
	struct stall *s = bpf_ringbuf_reserve(&stalls, sizeof(*s), 0);
	if (!s) {
		count_lost();
		return;
	}
	__u64 now = bpf_ktime_get_ns();
	s->cgroup_id = id;
	s->ns = now - start;
	s->end_ns = now;
	s->max_rqs = max_rqs;
	s->pad = 0;
	bpf_ringbuf_submit(s, 0);
}

/* throttle_cfs_rq returns true when it throttled the run queue (false when it found
 * quota after all), on 6.1 and on 6.18. */
SEC("fexit/throttle_cfs_rq")
int BPF_PROG(fexit_throttle_cfs_rq, struct cfs_rq *rq, bool ret)
{
	if (ret)
		throttled(rq);
	return 0;
}

SEC("fentry/unthrottle_cfs_rq")
int BPF_PROG(fentry_unthrottle_cfs_rq, struct cfs_rq *rq)
{
	unthrottled(rq);
	return 0;
}

/* kprobe variants: the argument is kept from entry to return per CPU (throttle_cfs_rq
 * runs under the run queue's lock and does not nest). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} entry_rq SEC(".maps");

SEC("kprobe/throttle_cfs_rq")
int BPF_KPROBE(kprobe_throttle_cfs_rq, struct cfs_rq *rq)
{
	__u32 zero = 0;
	__u64 *slot = bpf_map_lookup_elem(&entry_rq, &zero);
	if (slot)
		*slot = (__u64)rq;
	return 0;
}

/* ret is the whole return register (rax, x0): a bool return defines only its low byte
 * (x86-64 and arm64 ABIs). */
SEC("kretprobe/throttle_cfs_rq")
int BPF_KRETPROBE(kretprobe_throttle_cfs_rq, unsigned long ret)
{
	__u32 zero = 0;
	__u64 *slot = bpf_map_lookup_elem(&entry_rq, &zero);
	if (!slot || !*slot)
		return 0;
	struct cfs_rq *rq = (struct cfs_rq *)*slot;
	*slot = 0;
	if (ret & 0xff)
		throttled(rq);
	return 0;
}

SEC("kprobe/unthrottle_cfs_rq")
int BPF_KPROBE(kprobe_unthrottle_cfs_rq, struct cfs_rq *rq)
{
	unthrottled(rq);
	return 0;
}
