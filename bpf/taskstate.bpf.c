// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * taskstate: the signal state of chosen processes, read from the kernel for
 * `sigscope audit`.
 *
 * A task iterator (iter/task, Linux 5.8 and later; no kprobe, no trampoline)
 * walks every task once per read(). For the thread-group leader of each
 * process whose tgid user space put in `wanted`, it writes one struct
 * task_state to the seq_file: the masks and flags prepare_signal() decides
 * with, and which handlers are one-shot (SA_RESETHAND). /proc/PID/status
 * cannot give them all: it shows `blocked` but not `real_blocked`, where
 * sigtimedwait() parks the set it waits for, so a tini waiting for SIGTERM
 * looks like a shell that will drop it; and it shows no sa_flags, so
 * Node.js's one-shot SIGTERM handler, which re-raises the signal for the
 * kernel to drop at a namespace init, looks like a handler that shuts down.
 *
 * Nothing here runs on a hot path: the program runs only when sigscope reads
 * the iterator, and costs one hash look-up per task.
 */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "taskstate.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* tgids to report; filled from Go before the read (resized to fit). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} wanted SEC(".maps");

/* Keep the record type in BTF so that bpf2go generates its Go twin: no map
 * carries it by value. */
const struct task_state *unused_task_state __attribute__((unused));

/* The next three are sigscope.bpf.c's helpers of the same names, repeated
 * rather than moved to a shared header so that the tracer's object stays
 * byte-identical. See there for why each is written this way. */
static __always_inline __u64 array_off(__u32 idx, __u64 elem_size)
{
	return ((__u64)(idx & 63) * elem_size) & 4095;
}

static __always_inline struct upid *upid_at(struct pid *p, __u32 idx)
{
	__u64 off = array_off(idx, bpf_core_type_size(struct upid));

	return (void *)p + bpf_core_field_offset(struct pid, numbers) + off;
}

/* struct sigaction with its sa_flags, for this object alone: the shared
 * vmlinux_min.h leaves sa_flags out, so that the tracer's object, which
 * never reads it, stays byte-identical. CO-RE ignores the ___flags suffix
 * and relocates against the kernel's struct sigaction, where sa_flags is an
 * unsigned long on every kernel (an unsigned int on mips). */
struct sigaction___flags {
	void *sa_handler;
	unsigned long sa_flags;
} __attribute__((preserve_access_index));

struct k_sigaction___flags {
	struct sigaction___flags sa;
} __attribute__((preserve_access_index));

/* init_pid_ns.ns.inum: every task at level 0 lives there. */
#define PROC_PID_INIT_INO 0xEFFFFFFCU

SEC("iter/task")
int dump_task_state(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *t = ctx->task;
	struct task_state rec = {};
	struct sighand_struct *sh;
	__u32 tgid, level;

	if (!t)
		return 0;
	tgid = t->tgid;
	/* The leader only: kill(pid) checks the task with that pid, and one
	 * record per process is what user space expects. */
	if (t->pid != tgid || !bpf_map_lookup_elem(&wanted, &tgid))
		return 0;

	rec.pid = tgid;
	level = t->thread_pid->level;
	if (level == 0) {
		rec.ns_pid = tgid;
		rec.pidns = PROC_PID_INIT_INO;
	} else {
		struct upid *u = upid_at(t->thread_pid, level);
		struct pid_namespace *ns = NULL;
		int nr = 0;

		bpf_probe_read_kernel(&nr, sizeof(nr), &u->nr);
		bpf_probe_read_kernel(&ns, sizeof(ns), &u->ns);
		rec.ns_pid = nr;
		rec.pidns = ns ? BPF_CORE_READ(ns, ns.inum) : 0;
	}
	rec.sig_flags = t->signal->flags;
	rec.blocked = t->blocked.sig[0];
	rec.real_blocked = t->real_blocked.sig[0];
	bpf_probe_read_kernel(rec.comm, sizeof(rec.comm), t->comm);

	/* action[] indexed at run time: helper reads, two per signal (its
	 * handler and its sa_flags). The
	 * handler table is read without the siglock: a process that changes a
	 * disposition at this instant may show either value. */
	sh = t->sighand;
	if (sh) {
		void *action = (void *)sh + bpf_core_field_offset(struct sighand_struct, action);
		void *base = action + bpf_core_field_offset(struct k_sigaction, sa.sa_handler);
		/* The low 32 bits of sa_flags (little-endian, bpfel): where
		 * SA_RESETHAND is, whether the field is 4 or 8 bytes wide. */
		void *flags = action + bpf_core_field_offset(struct k_sigaction___flags, sa.sa_flags);
		__u64 stride = bpf_core_type_size(struct k_sigaction);

		for (__u32 i = 0; i < 64; i++) {
			void *h = NULL;
			__u32 f = 0;

			bpf_probe_read_kernel(&h, sizeof(h), base + array_off(i, stride));
			if (h == (void *)1) /* SIG_IGN */
				rec.ignored |= 1ULL << i;
			else if (h) /* not SIG_DFL: a user handler */
				rec.handled |= 1ULL << i;
			/* SA_RESETHAND matters only with a handler (user space
			 * masks it with handled): the kernel resets the
			 * disposition to SIG_DFL as it delivers the signal
			 * (Node.js's SIGTERM and SIGINT handlers re-raise after
			 * that). Read for every signal and added without a
			 * branch: a read under the handler's branch made the
			 * 6.1 verifier walk the dispositions' combinations past
			 * its million instructions. SA_RESETHAND is bit 31. */
			bpf_probe_read_kernel(&f, sizeof(f), flags + array_off(i, stride));
			rec.resethand |= (__u64)(f >> 31) << i;
			_Static_assert(TASKSTATE_SA_RESETHAND == 1U << 31, "SA_RESETHAND is bit 31");
		}
	}
	bpf_seq_write(seq, &rec, sizeof(rec));
	return 0;
}
