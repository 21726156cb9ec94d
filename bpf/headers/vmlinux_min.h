/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * A trimmed CO-RE view of the kernel types sigscope reads. Only the fields we
 * touch are declared; preserve_access_index makes libbpf relocate every access
 * against the running kernel's BTF, so the layout written here never matters.
 * Sizes that do matter (array strides) are taken with bpf_core_type_size().
 */
#ifndef __SIGSCOPE_VMLINUX_MIN_H__
#define __SIGSCOPE_VMLINUX_MIN_H__

typedef unsigned char __u8;
typedef short int __s16;
typedef short unsigned int __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long int __s64;
typedef long long unsigned int __u64;
typedef __u8 u8;
typedef __s16 s16;
typedef __u16 u16;
typedef __s32 s32;
typedef __u32 u32;
typedef __s64 s64;
typedef __u64 u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
enum { false = 0, true = 1 };

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
};

enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
};

enum {
	BPF_RB_AVAIL_DATA = 0,
	BPF_RB_RING_SIZE = 1,
	BPF_RB_CONS_POS = 2,
	BPF_RB_PROD_POS = 3,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

typedef struct {
	int counter;
} atomic_t;

typedef struct {
	unsigned long sig[1];
} sigset_t;

struct sigaction {
	void *sa_handler;
} __attribute__((preserve_access_index));

struct k_sigaction {
	struct sigaction sa;
} __attribute__((preserve_access_index));

struct sighand_struct {
	struct k_sigaction action[64];
} __attribute__((preserve_access_index));

struct list_head {
	struct list_head *next;
} __attribute__((preserve_access_index));

struct signal_struct {
	atomic_t live;
	unsigned int flags;
	int group_exit_code;
	int nr_threads;
	struct list_head thread_head;
} __attribute__((preserve_access_index));

/* x86_64's user registers, saved at the top of a task's kernel stack on
 * each entry: orig_ax is the system call's number (-1 or an interrupt's
 * vector when the entry was no system call), di its first argument. */
struct pt_regs {
	unsigned long di;
	unsigned long orig_ax;
} __attribute__((preserve_access_index));

/* What an fd is: its file's inode's mode. */
typedef unsigned short umode_t;

struct inode {
	umode_t i_mode;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct task_struct;
struct linux_binprm;

struct pid_namespace {
	struct task_struct *child_reaper;
	unsigned int level;
	struct ns_common ns;
} __attribute__((preserve_access_index));

struct upid {
	int nr;
	struct pid_namespace *ns;
} __attribute__((preserve_access_index));

struct pid {
	unsigned int level;
	struct upid numbers[1];
} __attribute__((preserve_access_index));

struct kernfs_node {
	u64 id;
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct cgroup_subsys_state {
	struct cgroup *cgroup;
} __attribute__((preserve_access_index));

enum cgroup_subsys_id {
	memory_cgrp_id = 4,
};

struct css_set {
	struct cgroup_subsys_state *subsys[16];
	struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));

struct sched_entity {
	u64 sum_exec_runtime; /* CPU time the task has used, ns */
} __attribute__((preserve_access_index));

struct task_struct {
	unsigned int flags;
	int on_cpu;
	struct sched_entity se;
	int exit_code;
	int exit_signal;
	int pid;
	int tgid;
	struct task_struct *real_parent;
	struct task_struct *group_leader;
	struct pid *thread_pid;
	char comm[16];
	struct signal_struct *signal;
	struct sighand_struct *sighand;
	sigset_t blocked;
	sigset_t real_blocked;
	struct css_set *cgroups;
	struct nsproxy *nsproxy;
	u64 start_time;
	unsigned int __state; /* TASK_RUNNING 0, INTERRUPTIBLE 1, UNINTERRUPTIBLE 2, ...: 5.14 and later */
	void *stack;
	struct list_head children; /* its children, linked by their sibling */
	struct list_head sibling;
	struct list_head thread_node; /* in signal->thread_head */
	struct files_struct *files;
} __attribute__((preserve_access_index));

/* Before 5.14 the state was a long named state. */
struct task_struct___old {
	long state;
} __attribute__((preserve_access_index));

/* Networking: what the connection programs read. */
struct net {
	struct ns_common ns;
	u32 hash_mix; /* random, drawn when the namespace is made */
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct nsproxy {
	struct net *net_ns;
} __attribute__((preserve_access_index));

struct in6_addr {
	u8 s6_addr[16];
} __attribute__((preserve_access_index));

/* A timewait socket (inet_timewait_sock) begins with the same sock_common:
 * only these fields are read from a socket that may be one. The addresses
 * and ports sit in anonymous unions in the kernel's: CO-RE finds them. */
struct sock_common {
	__be32 skc_daddr;
	__be32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	volatile unsigned char skc_state;
	possible_net_t skc_net;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
} __attribute__((preserve_access_index));

/* The socket's cgroup v2 (its creator's): a pointer since Linux 5.15; before,
 * a word that holds the pointer unless its low bit is set (the v1 net_cls
 * and net_prio data, and then the root cgroup). */
struct sock_cgroup_data {
	struct cgroup *cgroup;
} __attribute__((preserve_access_index));

struct sock_cgroup_data___old {
	u64 val;
} __attribute__((preserve_access_index));

/* sk_max_ack_backlog's size differs between kernels: read with
 * BPF_CORE_READ_BITFIELD_PROBED, which takes the running kernel's. */
struct sock {
	struct sock_common __sk_common;
	u32 sk_max_ack_backlog;
	u16 sk_protocol;
	struct sock_cgroup_data sk_cgrp_data;
} __attribute__((preserve_access_index));

/* Who spoke last on a connection: the sequence numbers of what it
 * received (rcv_nxt), what the application read of it (copied_seq), the
 * received segment that last moved the send window (snd_wl1: a pure ACK
 * after the peer's data leaves it at rcv_nxt, data leaves it behind), what
 * it wrote (write_seq) and what the peer acknowledged of that (snd_una). */
struct request_sock_queue {
	atomic_t qlen; /* a listener's handshakes under way (request sockets) */
} __attribute__((preserve_access_index));

struct inet_connection_sock {
	struct request_sock_queue icsk_accept_queue;
	struct {
		u32 lrcvtime; /* the jiffy of the last data segment received */
	} icsk_ack;
} __attribute__((preserve_access_index));

struct tcp_sock {
	u32 rcv_nxt;
	u32 copied_seq;
	u32 snd_wl1;
	u32 snd_una;
	u32 write_seq;
	u32 lsndtime;    /* the jiffy of the last data sent */
	u64 bytes_acked; /* of the data sent, how much the peer acknowledged */
} __attribute__((preserve_access_index));

struct net_device {
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

struct sk_buff {
	struct net_device *dev;
	unsigned char *head;
	__u16 transport_header;
	__u16 network_header;
} __attribute__((preserve_access_index));

struct kernel_siginfo {
	int si_signo;
	int si_errno;
	int si_code;
} __attribute__((preserve_access_index));

/* Task iterator context (iter/task, Linux 5.8 and later). */
struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} __attribute__((preserve_access_index));

#endif /* __SIGSCOPE_VMLINUX_MIN_H__ */
