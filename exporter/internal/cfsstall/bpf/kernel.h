/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The few kernel types the stall program reads, hand-written instead of a generated
 * vmlinux.h (tens of thousands of lines, tied to one kernel). preserve_access_index makes
 * every field access a CO-RE relocation: the loader (cilium/ebpf) finds each field's real
 * offset in the running kernel's BTF, so only the names and kinds here must be right, not
 * the layouts. Checked against the BTF of Debian's 6.1 cloud kernel and of Linux 6.18.
 */
#ifndef CFSSTALL_KERNEL_H
#define CFSSTALL_KERNEL_H
/* Tells bpf_tracing.h to use the kernel's register names (di, ax), as with a vmlinux.h. */
#define __VMLINUX_H__

typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

/* From include/uapi/linux/bpf.h (stable ABI). */
enum {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
};
#define BPF_ANY 0
#define BPF_NOEXIST 1
#define BPF_F_NO_PREALLOC 1

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

/* kn->id is the cgroup id: the inode number of the cgroup's directory (Linux 5.5+). */
struct kernfs_node {
	__u64 id;
};

struct cgroup {
	struct kernfs_node *kn;
};

struct cgroup_subsys_state {
	struct cgroup *cgroup;
};

/* The cpu controller's per-cgroup state; css is embedded. */
struct task_group {
	struct cgroup_subsys_state css;
};

/* One cgroup's run queue on one CPU. */
struct cfs_rq {
	struct task_group *tg;
};

/* The registers at a kprobe, from which bpf_tracing.h reads the arguments: bpf2go's -target
 * defines __TARGET_ARCH_<arch> for each object it builds. */
#if defined(__TARGET_ARCH_arm64)
/* arm64's pt_regs begins with user_pt_regs, which bpf_tracing.h casts the context to and
 * reads (x0 is the first argument and the return value). */
struct user_pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
};
struct pt_regs;
#elif defined(__TARGET_ARCH_x86)
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};
#else
#error "cfsstall: no pt_regs for this target (bpf2go -target amd64 or arm64)"
#endif

#pragma clang attribute pop

#endif
