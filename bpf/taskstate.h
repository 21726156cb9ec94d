/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The one definition of a task iterator record (bpf/taskstate.bpf.c). bpf2go
 * generates the Go type from it (-type task_state); never mirror it by hand.
 */
#ifndef __SIGSCOPE_TASKSTATE_H__
#define __SIGSCOPE_TASKSTATE_H__

#define TASKSTATE_COMM_LEN 16

/* sa_flags bit of a one-shot handler: the kernel resets the disposition to
 * SIG_DFL as it delivers the signal. 0x80000000 on x86, arm64 and every
 * other architecture sigscope builds for (alpha and parisc differ). */
#define TASKSTATE_SA_RESETHAND 0x80000000U

/* What prepare_signal() reads about a process, for every signal at once:
 * the masks have bit (signo-1) for each signal, the layout of
 * tracer.SignalSet. Read from the thread-group leader, the task a
 * process-directed kill(pid) is checked against. */
struct task_state {
	__u32 pid;          /* host tgid */
	__u32 ns_pid;       /* tgid in its own (active) pid namespace */
	__u32 pidns;        /* inode of that pid namespace */
	__u32 sig_flags;    /* signal->flags: SIGNAL_UNKILLABLE 0x40, SIGNAL_GROUP_EXIT 0x4 */
	__u64 blocked;      /* blocked.sig[0] */
	__u64 real_blocked; /* real_blocked.sig[0]: blocked before sigtimedwait() */
	__u64 handled;      /* sa_handler is a user function */
	__u64 ignored;      /* sa_handler is SIG_IGN */
	__u64 resethand;    /* a user handler with SA_RESETHAND in sa_flags: one-shot */
	char comm[TASKSTATE_COMM_LEN];
};

#endif /* __SIGSCOPE_TASKSTATE_H__ */
