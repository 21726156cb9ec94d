// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * sigscope: record each signal where the kernel decides its fate.
 *
 *   signal_generate     sender, target, the kernel's result and the facts needed
 *                       to say why (disposition, blocked mask, namespace roles)
 *   signal_deliver      a signal dequeued by its receiver, with the disposition
 *   sched_process_exit  how a process that matters ended (two prototypes: the
 *                       loader keeps the one matching the kernel's BTF)
 *   oom:mark_victim     the OOM killer picked a victim (two prototypes too)
 *   sched_process_exec  an exec by a process that entered its container's pid
 *                       namespace from outside (runc exec: a preStop hook,
 *                       kubectl exec, an exec probe; a container's start)
 *   ns_empty            (from signal_generate, whatever the signal mask) a
 *                       dying namespace init notifies its parent: every other
 *                       process of its namespace has exited and been reaped
 *
 * Filtering happens here so that uninteresting signals never reach the ring.
 * Submits never wake the reader while it is awake; a sleeping reader is woken
 * once, through the doorbell ring (see wake_reader()).
 *
 * The generate handler runs inside kill(2) with the target's siglock held and
 * interrupts off, so its cost is added to every traced signal. Kernel memory
 * is read with direct loads through BTF pointers (tp_btf arguments and
 * bpf_get_current_task_btf()), which the verifier turns into guarded loads:
 * a few ns each, against ~20 ns for a bpf_probe_read_kernel() call where
 * every kernel return is slowed by a mitigation (SRSO "safe RET"). What
 * the verifier does not allow through a BTF pointer (an array element at a
 * run-time index, an argument some kernels type as a scalar) goes through
 * read_at(): a direct load too where the kernel has bpf_rdonly_cast (6.2+),
 * a helper read before.
 *
 * Kernels before 5.11 have no bpf_get_current_task_btf(): the current task is
 * then an integer to the verifier, and every load through it must be a helper
 * read. The same source builds a second object for them, sigscope_compat
 * (-DSIGSCOPE_COMPAT), in which the current task comes from
 * bpf_get_current_task() and every read through a task that may be the
 * current one, or that was reached from it, goes through cur_read() or
 * task_read() (BPF_CORE_READ); the tracer loads it only where the kernel
 * lacks the helper. In the fast object both are the plain member chain, so
 * its instructions are what they would be without them.
 */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include "sigscope.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#ifdef SIGSCOPE_COMPAT
/* Before 5.11: helper reads, relocated by CO-RE. task_read() is for code
 * that reads both the current task and tasks it got as BTF pointers (the
 * tracepoints' arguments): is_cur, a constant after inlining, picks the
 * helper read only where it is needed. */
#define current_task() ((struct task_struct *)bpf_get_current_task())
#define cur_read(src, ...) BPF_CORE_READ(src, __VA_ARGS__)
#define task_read(is_cur, src, ...) ((is_cur) ? BPF_CORE_READ(src, __VA_ARGS__) : ___arrow(src, __VA_ARGS__))
#else
/* src->a->b...: direct loads through a BTF pointer. */
#define current_task() bpf_get_current_task_btf()
#define cur_read(src, ...) ___arrow(src, __VA_ARGS__)
#define task_read(is_cur, src, ...) ___arrow(src, __VA_ARGS__)
#endif

#define PF_EXITING 0x00000004
#define SI_USER 0
#define SI_KERNEL 0x80
#define SIGCHLD 17
#define CLD_EXITED 1
#define CLD_DUMPED 3

/* Set from Go before load. */
const volatile __u64 signal_mask = 0;   /* bit (signo-1) set: traced */
const volatile __u32 self_tgid = 0;     /* the tracer: always dropped */
const volatile __u32 filter_pid = 0;    /* 0: any; else sender or target tgid */
const volatile char filter_comm[TASK_COMM_LEN] = {}; /* "": any */
const volatile bool direct_reads = false; /* the kernel has bpf_rdonly_cast: see read_at */
const volatile bool watch_nets = false;   /* the TCP programs are attached: count stopping namespaces' connections */
const volatile bool every_reset = false;  /* tcp_send_reset fires for every RST (6.10+): a timewait socket's too, so after_close can be counted whole */
__u32 probers_on = 0; /* user space registered a prober (probers): only then do the TCP programs look for probes */
const volatile __u64 ns_per_jiffy = 0;   /* the kernel's tick (1e9 / CONFIG_HZ), found by user space; 0: a client's last data is not timed */
const volatile __u32 cross_jiffies = 0;  /* CROSS_MS in ticks (at least 1); 0: the tick is not known, and no data is taken to have crossed an answer */

/* Returns obj as an untrusted pointer to the kernel type btf_id: loads
 * through it are direct, fault-tolerant loads (a fault reads 0), like those
 * through any BTF pointer. The verifier replaces the call with a register
 * move. Weak: on kernels without it the call is left unreachable, as
 * direct_reads is then false. */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized from Go */
} events SEC(".maps");

#define BPF_F_MMAPABLE (1U << 10)

/* The reader's state, which it maps and writes: READER_SLEEPING once it has
 * found the events ring empty and is about to wait for the doorbell. Only
 * the reader writes it; the programs only read it. */
#define READER_SLEEPING 1

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} reader_state SEC(".maps");

/* The doorbell: the reader waits on this ring, never on `events`. Ringing it
 * writes an empty record and discards it with the ring's default (adaptive)
 * wakeup, which wakes the reader only for the record at its consumer
 * position: however many CPUs ring at once, the reader is woken once per
 * sleep. Its own ring, so ringing cannot fail because `events` is full. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); /* raised to the page size from Go */
} doorbell SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counters);
} event_counters SEC(".maps");

/* tgids a traced signal was generated for: their exit is always reported. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} targeted SEC(".maps");

/* The last process each CPU recorded in `targeted`, so that a stream of
 * signals to one process costs an inlined array look-up, not a hash update
 * (an LRU update takes a lock and a node every time). start_time tells a
 * reused tgid from the process that had it. */
struct target_key {
	__u32 tgid;
	__u32 _pad;
	__u64 start_time;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct target_key);
} last_target SEC(".maps");

/* 1-argument sched_process_exit only: tgid -> leader start_time, so that two
 * threads that both see live == 0 produce a single exit event. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} exited SEC(".maps");

/* The network namespaces of the containers being stopped, with what their
 * TCP connections did since (struct net_stats). A stop signal from outside
 * a namespace adds it (watch_net); user space adds one whose stop began
 * otherwise (a preStop hook) and deletes each when its episode is over.
 * Outside a stop a TCP state change costs this one look-up. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct net_stats);
} stopping_nets SEC(".maps");

/* The counts of stopping_nets split by socket cgroup (struct net_cg_key):
 * written only for a watched namespace's connections, deleted with the
 * namespace by user space. A full table leaves the split short; user space
 * says what it could not attribute. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct net_cg_key);
	__type(value, struct net_cg_counts);
} stopping_conns SEC(".maps");

/* The processes that entered each pid namespace from outside (struct
 * exec_slots), written by handle_exec, read by note_blocked: a preStop exec
 * hook still running when the grace ran out is read with the init. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct exec_slots);
} ns_execs SEC(".maps");

/* The inbound connections of watched namespaces that their container's
 * side closed (struct conn_key, struct conn_closed): a request that comes
 * on one later moves its count to NET_AFTER_CLOSE, once. LRU: the oldest
 * closes go first, and a request after one that went is not counted (the
 * count is short, never wrong). Deleted with nothing: each entry carries
 * its watch's beginning. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct conn_key);
	__type(value, struct conn_closed);
} closed_conns SEC(".maps");

/* The processes whose connections are probes, not clients: the kubelet's
 * (user space finds them by name and keeps this table). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u8);
} probers SEC(".maps");

/* A prober's sockets between connect() (where the prober is the current
 * task) and the handshake's end or failure (in softirq, where it is not),
 * by address. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u8);
} prober_socks SEC(".maps");

/* A prober's connections as the server sees them (struct conn_key with
 * netns 0: laddr, lport the server's; raddr, rport the prober's), from its
 * handshake's end, so that the server's side of each is counted apart. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct conn_key);
	__type(value, __u8);
} probe_peers SEC(".maps");

/* The server sockets of probes in watched namespaces, by address: their
 * fates go to net_stats.probes. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u8);
} probe_socks SEC(".maps");

/* Refused SYNs of watched namespaces by their source (struct conn_key with
 * netns 0, as probe_peers), while probers are registered: a prober's
 * failed connect() that follows moves its count to the probes. */
struct conn_refused {
	__u64 begin_ns;
	__u64 at_ns;   /* when it was refused */
	__u64 prev_ns; /* the namespace's last refused attempt before it: given back when this one moves off NET_REFUSED and was the last */
	__u32 netns;
	__u32 moved;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct conn_key);
	__type(value, struct conn_refused);
} refused_from SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct peer_key);
	__type(value, struct peer_counts);
} stopping_peers SEC(".maps");

/* Per CPU: where watch_net builds a namespace's first entry (struct
 * net_stats is too large for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct net_stats);
} net_stats_scratch SEC(".maps");

/* Per CPU: the socket whose received RST is being handled, so that the
 * state change that follows (to TCP_CLOSE) is not counted a second time. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} rst_received SEC(".maps");

/* Keep these types in BTF so that bpf2go generates their Go twins: no map
 * carries them by value. */
const struct event *unused_event __attribute__((unused));
const enum event_type *unused_event_type __attribute__((unused));
const enum fact *unused_fact __attribute__((unused));
const enum net_kind *unused_net_kind __attribute__((unused));
const struct net_cg_key *unused_net_cg_key __attribute__((unused));
const struct net_cg_counts *unused_net_cg_counts __attribute__((unused));
const enum blocked_role *unused_blocked_role __attribute__((unused));

static __always_inline bool signal_traced(int sig)
{
	if (sig < 1 || sig > 64)
		return false;
	return (signal_mask >> ((sig - 1) & 63)) & 1;
}

static __always_inline bool comm_matches(const char *comm)
{
#pragma unroll
	for (int i = 0; i < TASK_COMM_LEN; i++) {
		if (comm[i] != filter_comm[i])
			return false;
		if (comm[i] == 0)
			return true;
	}
	return true;
}

/* task->comm is always NUL-terminated within its 16 bytes: copy it whole as
 * two words (the verifier allows wide loads inside a char array member). */
static __always_inline void copy_comm(char *dst, struct task_struct *t)
{
#ifdef SIGSCOPE_COMPAT
	bpf_core_read(dst, TASK_COMM_LEN, &t->comm);
#else
	const __u64 *src = (const __u64 *)t->comm;
	__u64 *d = (__u64 *)dst;

	d[0] = src[0];
	d[1] = src[1];
#endif
}

/* Whether t's comm is filter_comm. The compat object cannot load the current
 * task's comm directly: it copies it to the stack first. */
#ifdef SIGSCOPE_COMPAT
static __always_inline bool task_comm_matches(struct task_struct *t)
{
	char comm[TASK_COMM_LEN];

	copy_comm(comm, t);
	return comm_matches(comm);
}
#else
#define task_comm_matches(t) comm_matches((t)->comm)
#endif

static __always_inline struct counters *counters_get(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&event_counters, &zero);
}

/* The field of the kernel object of the given type at addr, where addr is an
 * address the verifier cannot load through: an array element at a run-time
 * index, or a tracepoint argument that some kernels (6.12 among them) type as
 * a scalar because it can hold magic values. The branch not taken is pruned
 * by the verifier, which knows direct_reads at load time. */
#ifdef SIGSCOPE_COMPAT
/* No kernel without bpf_get_current_task_btf() (5.11) has bpf_rdonly_cast
 * (6.2): the compat object has the helper read only, and no kfunc call. */
#define read_at(type, addr, field)                                                           \
	({                                                                                   \
		typeof(((type *)0)->field) __v = 0;                                          \
		bpf_probe_read_kernel(&__v, sizeof(__v), &((type *)(addr))->field);          \
		__v;                                                                         \
	})
#else
#define read_at(type, addr, field)                                                           \
	({                                                                                   \
		typeof(((type *)0)->field) __v = 0;                                          \
		if (direct_reads)                                                            \
			__v = ((type *)bpf_rdonly_cast((const void *)(addr),                 \
						       bpf_core_type_id_kernel(type)))       \
				      ->field;                                               \
		else                                                                         \
			bpf_probe_read_kernel(&__v, sizeof(__v), &((type *)(addr))->field);  \
		__v;                                                                         \
	})
#endif

/* p as a read-only pointer the verifier does not trust, where the kernel has
 * bpf_rdonly_cast; p itself before. The verifier of 6.3 and later looks up,
 * for every pointer field loaded through a trusted pointer, whether the
 * field is marked trusted or RCU-protected: four searches by name through
 * the kernel's whole BTF each time, on every path it explores. On
 * handle_generate that was 86 % of a 2 s verification here, and a quarter
 * of a minute per load under qemu. A pointer walked from an untrusted one
 * stays untrusted without a search. The price is at run time: a load
 * through a trusted pointer (a tracepoint's task, bpf_get_current_task_btf(),
 * and what the kernel marks safe under RCU: a task's real_parent,
 * group_leader and cgroups, a css_set's dfl_cgrp, a cgroup's kn) is a plain
 * load on those kernels, one through an untrusted pointer is guarded against
 * faults (seven instructions more, a compare and a branch among them), as is
 * one through any other pointer walked from a task. Use it on the task
 * arguments of programs that run rarely, for reads never passed to a
 * helper; the path that runs for every traced signal reads its pointers
 * once instead (handle_generate). */
#ifdef SIGSCOPE_COMPAT
#define untrusted(type, p) (p)
#else
#define untrusted(type, p) (direct_reads ? (type *)bpf_rdonly_cast((const void *)(p), bpf_core_type_id_kernel(type)) : (p))
#endif

/* idx * elem_size, bounded for the verifier. A multiply by a register loses
 * all bounds on kernels before ~6.3 (only ADD, SUB and AND keep them when the
 * other operand is not a constant), and pointer arithmetic then fails with
 * "math between ptr_ pointer and register with unbounded min value". The
 * final AND bounds it again; 4095 exceeds 63 * any element size used here. */
static __always_inline __u64 array_off(__u32 idx, __u64 elem_size)
{
	return ((__u64)(idx & 63) * elem_size) & 4095;
}

/* &pid->numbers[idx] as a plain address. A run-time index through a BTF
 * pointer is rejected ("invalid variable offset"), so the element is read
 * with read_at; the stride is the running kernel's sizeof(struct upid). */
static __always_inline struct upid *upid_at(struct pid *p, __u32 idx)
{
	__u64 off = array_off(idx, bpf_core_type_size(struct upid));

	return (void *)p + bpf_core_field_offset(struct pid, numbers) + off;
}

/* init_pid_ns.ns.inum: every task at level 0 lives there. */
#define PROC_PID_INIT_INO 0xEFFFFFFCU

/* The pid namespace at the given level of a task's pid (its active one when
 * level == p->level). nsproxy is not used: it is NULL in an exiting task. */
static __always_inline struct pid_namespace *ns_at(struct pid *p, __u32 level)
{
	return read_at(struct upid, upid_at(p, level), ns);
}

/* The memory controller's css of a css_set, NULL where the kernel has none
 * (its cgroup is the cgroup v1 memory directory on a v1 host). */
static __always_inline struct cgroup_subsys_state *memory_css(struct css_set *cs, bool is_cur)
{
	if (!bpf_core_enum_value_exists(enum cgroup_subsys_id, memory_cgrp_id))
		return NULL;
	return task_read(is_cur, cs, subsys[bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id)]);
}

/* Fill the identity of t, whose pid sits at the given level, from what the
 * caller read of it: its thread_pid (tp), its cgroup v2 id and its memory
 * css (memory_css). Level 0 (the host) needs no helper read: the namespace
 * is init_pid_ns and the in-namespace pid is the tgid. is_cur: t is the
 * current task (task_read). Only t's own scalar fields are read through t,
 * which may be a trusted pointer (see handle_generate); its group leader,
 * through an untrusted view of it. */
static __always_inline void fill_proc_read(struct proc *out, struct task_struct *t, struct pid *tp,
					   __u64 cgroup_id, struct cgroup_subsys_state *mem, __u32 level, bool is_cur)
{
	out->pid = task_read(is_cur, t, tgid);
	out->tid = task_read(is_cur, t, pid);
	if (level == 0) {
		out->ns_pid = out->pid;
		out->pidns = PROC_PID_INIT_INO;
	} else {
		struct pid *lp = task_read(is_cur, untrusted(struct task_struct, t), group_leader, thread_pid);
		struct pid_namespace *ns = ns_at(tp, level);

		out->ns_pid = read_at(struct upid, upid_at(lp, level), nr);
		out->pidns = ns ? read_at(struct pid_namespace, ns, ns.inum) : 0;
	}
	out->cgroup_id = cgroup_id;
	out->cgroup_v1_id = mem ? task_read(is_cur, mem, cgroup, kn, id) : 0;
	copy_comm(out->comm, t);
}

static __always_inline void fill_proc(struct proc *out, struct task_struct *t, __u32 level, bool is_cur)
{
	struct css_set *cs = task_read(is_cur, t, cgroups);

	fill_proc_read(out, t, task_read(is_cur, t, thread_pid), task_read(is_cur, cs, dfl_cgrp, kn, id),
		       memory_css(cs, is_cur), level, is_cur);
}

/* Whether the pid a (level al) has a number in the namespace where pid b
 * (level bl) lives. Everyone has a pid in the root namespace; otherwise
 * compare the namespace at b's level. */
static __always_inline bool pid_reaches(struct pid *a, __u32 al, struct pid *b, __u32 bl)
{
	if (bl == 0)
		return true;
	if (al < bl)
		return false;
	return ns_at(a, bl) == ns_at(b, bl);
}

/* t's real_parent, its real_parent, and so on: MAX_ANCESTORS tasks, read
 * without a test between them (t is the current task or was reached from
 * it: cur_read). A task's real_parent is never NULL while it lives (the
 * swapper is its own); NULL where a read failed. */
static __always_inline void read_ancestors(struct task_struct *anc[MAX_ANCESTORS], struct task_struct *t)
{
	anc[0] = cur_read(t, real_parent);
#pragma unroll
	for (int i = 1; i < MAX_ANCESTORS; i++)
		anc[i] = anc[i - 1] ? cur_read(anc[i - 1], real_parent) : NULL;
}

/* The ancestors read by read_ancestors, nearest first, up to the first
 * without a pid (the swapper, or one not read) or the first that is its
 * own parent (the swapper again). */
static __always_inline void fill_ancestors_read(struct event *e, struct task_struct *const anc[MAX_ANCESTORS])
{
	struct task_struct *p = anc[0];
	__u8 n = 0;

#pragma unroll
	for (int i = 0; i < MAX_ANCESTORS; i++) {
		__u32 pid = p ? cur_read(p, tgid) : 0;
		if (pid == 0) {
			e->ancestors[i].pid = 0;
			e->ancestors[i]._pad = 0;
			__builtin_memset(e->ancestors[i].comm, 0, TASK_COMM_LEN);
			continue;
		}
		e->ancestors[i].pid = pid;
		e->ancestors[i]._pad = 0;
		copy_comm(e->ancestors[i].comm, p);
		n++;
		p = i + 1 < MAX_ANCESTORS ? anc[i + 1] : NULL;
		if (!p || cur_read(p, tgid) == pid) /* swapper is its own parent */
			p = NULL;
	}
	e->ancestors_len = n;
}

static __always_inline void fill_ancestors(struct event *e, struct task_struct *t)
{
	struct task_struct *anc[MAX_ANCESTORS];

	read_ancestors(anc, t);
	fill_ancestors_read(e, anc);
}

/* Reserve, or count the loss. Returns NULL when the ring is full. The record
 * is not zeroed: every handler writes every field. */
static __always_inline struct event *reserve(struct counters *c, int type)
{
	struct event *e;

	c->seen[type & (EV_TYPES - 1)]++;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		c->dropped[type & (EV_TYPES - 1)]++;
		return NULL;
	}
	e->ts_ns = bpf_ktime_get_boot_ns();
	e->type = type;
	e->result = 0;
	e->group = 0;
	e->handler = 0;
	e->si_code = 0;
	e->facts = 0;
	e->exit_code = 0;
	e->ancestors_len = 0;
	__builtin_memset(e->_pad, 0, sizeof(e->_pad));
	e->netns = 0;
	return e;
}

/*
 * Wake the reader if it sleeps; called after each commit to `events`.
 *
 * Why no wakeup is lost (a store-load race on each side):
 *   reader: store READER_SLEEPING; full barrier; look at `events` (a record
 *           committed or still busy there: do not sleep)
 *   here:   commit (an xchg on the record's header: a full barrier); load
 *           the reader's state
 * With a full barrier between each side's store and load, at least one of
 * them sees the other's store: the reader sees the record, or this program
 * sees READER_SLEEPING and rings the doorbell.
 *
 * The doorbell's wakeup is the kernel's adaptive one (flags 0): it fires when
 * the record committed is the one at the consumer position. Before it sleeps
 * the reader consumes the doorbell up to its first busy record, then (after
 * its barrier) checks that the record at that position is not already
 * committed; the commit of that record then sees the new consumer position
 * (xchg, then load), so it wakes the reader. The records behind it, rung by
 * other CPUs at the same moment, do not: one wakeup per sleep, without an
 * atomic instruction (which would need Linux 5.12). A full doorbell ring
 * means the record at its consumer position is committed or about to be, so
 * a failed reserve loses nothing.
 */
static __always_inline void wake_reader(void)
{
	__u32 zero = 0;
	__u32 *state = bpf_map_lookup_elem(&reader_state, &zero);
	void *d;

	if (!state || *(volatile __u32 *)state != READER_SLEEPING)
		return;
	d = bpf_ringbuf_reserve(&doorbell, 8, 0);
	if (d)
		bpf_ringbuf_discard(d, 0);
}

static __always_inline void submit(struct counters *c, struct event *e, int type)
{
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	c->emitted[type & (EV_TYPES - 1)]++;
	wake_reader();
}

static __always_inline void zero_proc(struct proc *p)
{
	__builtin_memset(p, 0, sizeof(*p));
}

static __always_inline __u8 handler_class(void *h)
{
	if (h == (void *)0) /* SIG_DFL */
		return 0;
	if (h == (void *)1) /* SIG_IGN */
		return 1;
	return 2;
}

/* Remember that a traced signal targeted this process (tgid, its group
 * leader's start time), so that its exit is reported whatever its
 * namespace. */
static __always_inline void mark_targeted(__u32 tgid, __u64 start)
{
	__u32 zero = 0;
	struct target_key *last = bpf_map_lookup_elem(&last_target, &zero);
	__u8 one = 1;

	if (!last || (last->tgid == tgid && last->start_time == start))
		return;
	if (!bpf_map_lookup_elem(&targeted, &tgid))
		bpf_map_update_elem(&targeted, &tgid, &one, BPF_ANY);
	last->tgid = tgid;
	last->start_time = start;
}

/* A namespace init's parent is told of its death (do_notify_parent, from
 * exit_notify, by the init's last thread) only after zap_pid_ns_processes()
 * has killed every other process of the namespace and waited until each was
 * reaped: from then on the namespace is empty, and every exit of it is
 * already in the ring (the ring keeps reservation order). An episode can
 * complete at this record instead of after a settle time. Recognised by
 * what only that call does: a real siginfo with CLD_EXITED..CLD_DUMPED, the
 * group leader's exit_signal, sent by an exiting task whose tgid is 1 in its
 * (non-root) namespace to a process outside it. Rare: on the path of a
 * signal not traced it costs one compare (SIGCHLD or not). */
static __always_inline void note_ns_empty(int sig, struct kernel_siginfo *info, struct task_struct *cur,
					  struct task_struct *parent)
{
	struct counters *c;
	struct event *e;
	__u32 level, plevel;

	level = cur_read(cur, thread_pid, level);
	if (level == 0 || info == (void *)0 || info == (void *)1)
		return;
	if (sig != cur_read(cur, group_leader, exit_signal))
		return;
	int code = read_at(struct kernel_siginfo, info, si_code);
	if (code < CLD_EXITED || code > CLD_DUMPED)
		return;
	if (read_at(struct upid, upid_at(cur_read(cur, group_leader, thread_pid), level), nr) != 1)
		return;
	plevel = parent->thread_pid->level;
	if (pid_reaches(parent->thread_pid, plevel, cur_read(cur, thread_pid), level))
		return;
	if (filter_pid && cur_read(cur, tgid) != filter_pid && parent->tgid != filter_pid)
		return;
	if (filter_comm[0] && !task_comm_matches(cur) && !comm_matches(parent->comm))
		return;
	c = counters_get();
	if (!c)
		return;
	e = reserve(c, EV_NS_EMPTY);
	if (!e)
		return;
	e->signo = sig;
	e->si_code = code;
	e->sig_flags = cur_read(cur, signal, flags);
	e->facts = FACT_SENDER_EXITING | FACT_TARGET_NS_CHILD | FACT_TARGET_NS_INIT;
	fill_proc(&e->target, cur, level, true);
	fill_proc(&e->sender, parent, plevel, false);
	__builtin_memset(e->ancestors, 0, sizeof(e->ancestors));
	submit(c, e, EV_NS_EMPTY);
}

/* Signals that can stop a container: their sending from outside the target's
 * network namespace begins the count of its connections. */
#define SIGINT 2
#define SIGQUIT 3
#define SIGKILL 9
#define SIGTERM 15
#define SIGPWR 30
#define NET_STOP_SIGNALS ((1ULL << (SIGINT - 1)) | (1ULL << (SIGQUIT - 1)) | (1ULL << (SIGKILL - 1)) | \
			  (1ULL << (SIGTERM - 1)) | (1ULL << (SIGPWR - 1)))

/* The inode of the network namespace of a task whose nsproxy is nsp. */
static __always_inline __u32 nsproxy_netns(struct nsproxy *nsp, bool is_cur)
{
	if (!nsp) /* an exiting task */
		return 0;
	return task_read(is_cur, nsp, net_ns, ns.inum);
}

static __always_inline __u32 task_netns(struct task_struct *t, bool is_cur)
{
	return nsproxy_netns(task_read(is_cur, t, nsproxy), is_cur);
}

/* A network namespace's generation (struct net's hash_mix): with its
 * inode, which namespace it is; 0 where the kernel has no hash_mix. */
static __always_inline __u32 net_gen(const struct net *net)
{
	if (!bpf_core_field_exists(net->hash_mix))
		return 0;
	return BPF_CORE_READ(net, hash_mix);
}

/* st, the entry of a namespace's inode, if it is this namespace's (gen):
 * an entry user space began (no generation yet) adopts it; one another
 * namespace of the same inode left behind is not this one's. */
static __always_inline struct net_stats *watched_net(struct net_stats *st, __u32 gen)
{
	if (!st)
		return NULL;
	if (!st->net_gen)
		st->net_gen = gen;
	else if (gen && st->net_gen != gen)
		return NULL;
	return st;
}

/* netns, the target's network namespace; when a stop signal comes into it
 * from another one (the runtime's), add it to stopping_nets (a namespace
 * already there keeps its beginning) and set FACT_NET_WATCHED. A full table
 * leaves the fact unset: the episode then says its connections were not
 * counted. One from the runtime in the same namespace sets FACT_NET_SHARED.
 * Every other signal returns at the first test: a compare or two. */
static __always_inline __u32 watch_net(int sig, struct task_struct *cur, struct task_struct *task, __u32 netns,
				       __u64 now, __u32 *facts)
{
	if (!watch_nets || !netns || !((NET_STOP_SIGNALS >> ((sig - 1) & 63)) & 1))
		return netns;
	cur = untrusted(struct task_struct, cur);
	task = untrusted(struct task_struct, task);
	if (task_netns(cur, true) == netns) {
		/* From outside the container's pid namespace (the runtime) yet
		 * in its network namespace: the container shares the node's (or
		 * another's), whose connections are not its own to count. */
		if (!(*facts & FACT_SENDER_IN_TARGET_NS))
			*facts |= FACT_NET_SHARED;
		return netns;
	}
	{
		struct nsproxy *nsp = BPF_CORE_READ(task, nsproxy);
		__u32 gen = nsp ? net_gen(BPF_CORE_READ(nsp, net_ns)) : 0;
		struct net_stats *st = bpf_map_lookup_elem(&stopping_nets, &netns);

		if (st && st->net_gen && gen && st->net_gen != gen)
			st = NULL; /* a dead namespace's, of the same inode: begin anew */
		if (!st) {
			__u32 zero = 0;
			struct net_stats *init = bpf_map_lookup_elem(&net_stats_scratch, &zero);

			if (init) {
				__builtin_memset(init, 0, sizeof(*init));
				init->begin_ns = now; /* the signal's own time: the count begins at it */
				init->net_gen = gen;
				/* BPF_ANY replaces a dead namespace's entry; two CPUs
				 * beginning at once leave one of two equal beginnings. */
				bpf_map_update_elem(&stopping_nets, &netns, init, BPF_ANY);
			}
		}
		if (watched_net(bpf_map_lookup_elem(&stopping_nets, &netns), gen))
			*facts |= FACT_NET_WATCHED;
	}
	return netns;
}

static __always_inline void net_count_n(struct net_stats *st, __u32 kind, __u64 now, __u64 n)
{
	kind &= NET_KINDS - 1;
	__sync_fetch_and_add(&st->count[kind], n);
	if (!st->first_ns[kind])
		st->first_ns[kind] = now; /* a race between CPUs keeps one of two equal-enough times */
	st->last_ns[kind] = now;
}

static __always_inline void net_count(struct net_stats *st, __u32 kind, __u64 now)
{
	net_count_n(st, kind, now, 1);
}

#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2
#define TCP_SYN_RECV 3
#define TCP_FIN_WAIT1 4
#define TCP_CLOSE 7
#define TCP_CLOSE_WAIT 8
#define TCP_LAST_ACK 9
#define TCP_LISTEN 10
#define IPPROTO_TCP 6
#define AF_INET 2
#define AF_INET6 10

/* Direct loads through the tracepoint's BTF pointer (a fault reads 0): on
 * the path of every TCP state change of the node, no helper call. */
static __always_inline struct net_stats *stopping_net_of(const struct sock *sk, __u32 *netns)
{
	struct net *net = sk->__sk_common.skc_net.net;

	struct net_stats *st;

	*netns = net->ns.inum;
	st = bpf_map_lookup_elem(&stopping_nets, netns);
	if (!st)
		return NULL; /* outside a stop: this one look-up */
	return watched_net(st, net_gen(net));
}

/* The cgroup v2 id of the process that made sk; 0 when unknown. Only on a
 * watched namespace's connections. */
static __always_inline __u64 sock_cgroup_id(const struct sock *sk)
{
	struct cgroup *cg;

	if (!bpf_core_field_exists(sk->sk_cgrp_data))
		return 0;
	if (bpf_core_field_exists(((struct sock_cgroup_data *)0)->cgroup)) {
		/* Direct loads through the tracepoint's BTF pointer (a fault
		 * reads 0): counted twice per connection of a watched
		 * namespace, where helper reads cost a tenth of its programs'
		 * run time. */
		cg = sk->sk_cgrp_data.cgroup;
		if (!cg)
			return 0;
		return cg->kn->id;
	} else {
		struct sock_cgroup_data___old *old = (void *)&sk->sk_cgrp_data;
		__u64 val = BPF_CORE_READ(old, val);

		if (val & 1) /* v1 net_cls/net_prio data: the root cgroup */
			return 0;
		cg = (struct cgroup *)val;
	}
	if (!cg)
		return 0;
	return BPF_CORE_READ(cg, kn, id);
}

/* Adds delta to kind's count of the cgroup cgroup_id in a watched
 * namespace. */
static __always_inline void net_count_cg(struct net_stats *st, __u32 netns, __u64 cgroup_id, __u32 kind, __s64 delta)
{
	struct net_cg_key key = {.netns = netns, .begin_ns = st->begin_ns, .cgroup_id = cgroup_id};
	struct net_cg_counts *cc;

	if (cgroup_id <= 1)
		return;
	cc = bpf_map_lookup_elem(&stopping_conns, &key);
	if (!cc) {
		struct net_cg_counts zero = {};

		bpf_map_update_elem(&stopping_conns, &key, &zero, BPF_NOEXIST);
		cc = bpf_map_lookup_elem(&stopping_conns, &key);
		if (!cc)
			return; /* full: user space finds the split short */
	}
	__sync_fetch_and_add(&cc->count[kind & (NET_KINDS - 1)], delta);
}

/* Counts kind for sk's namespace (st), and for its cgroup in it; returns
 * the cgroup. */
static __always_inline __u64 net_count_sock(struct net_stats *st, const struct sock *sk, __u32 netns, __u32 kind, __u64 now)
{
	__u64 cgroup_id = sock_cgroup_id(sk);

	net_count(st, kind, now);
	net_count_cg(st, netns, cgroup_id, kind, 1);
	return cgroup_id;
}

/* An IPv4 connection of a dual-stack (AF_INET6) socket keeps v4-mapped
 * addresses (::ffff:a.b.c.d): keyed as IPv4, so that it meets its peer's
 * AF_INET socket (a prober's) and the IPv4 segments that answer it. */
static __always_inline void conn_key_v4mapped(struct conn_key *k)
{
	const __u32 *r = (const __u32 *)k->raddr, *l = (const __u32 *)k->laddr;

	if (k->family != AF_INET6 || r[0] || r[1] || r[2] != bpf_htonl(0xffff))
		return;
	k->family = AF_INET;
	((__u32 *)k->raddr)[0] = r[3];
	((__u32 *)k->laddr)[0] = l[3];
	for (int i = 1; i < 4; i++) {
		((__u32 *)k->raddr)[i] = 0;
		((__u32 *)k->laddr)[i] = 0;
	}
}

/* The connection's addresses, as closed_conns keys it: the same for the
 * socket that closed it and for the timewait socket that may answer it
 * later (both begin with a sock_common). */
static __always_inline void conn_key_of(struct conn_key *k, const struct sock *sk, __u32 netns)
{
	const struct sock_common *c = &sk->__sk_common;

	k->netns = netns;
	k->family = BPF_CORE_READ(c, skc_family);
	k->lport = BPF_CORE_READ(c, skc_num);
	k->rport = BPF_CORE_READ(c, skc_dport);
	if (k->family == AF_INET6 && bpf_core_field_exists(c->skc_v6_daddr)) {
		BPF_CORE_READ_INTO(&k->laddr, c, skc_v6_rcv_saddr);
		BPF_CORE_READ_INTO(&k->raddr, c, skc_v6_daddr);
	} else {
		BPF_CORE_READ_INTO((__u32 *)k->laddr, c, skc_rcv_saddr);
		BPF_CORE_READ_INTO((__u32 *)k->raddr, c, skc_daddr);
	}
	conn_key_v4mapped(k);
}

/* Adds delta to kind's count of the client at addr (family; IPv4 in the
 * first 4 bytes), for a watched namespace's stop (st). */
static __always_inline void peer_count(struct net_stats *st, __u32 netns, __u16 family, const __u8 *addr, __u32 kind, __s64 delta)
{
	struct peer_key key = {.netns = netns, .family = family, .begin_ns = st->begin_ns};
	struct peer_counts *pc;

	__builtin_memcpy(key.addr, addr, sizeof(key.addr));
	pc = bpf_map_lookup_elem(&stopping_peers, &key);
	if (!pc) {
		struct peer_counts zero = {};

		if (delta < 0)
			return; /* evicted: nothing to take back */
		bpf_map_update_elem(&stopping_peers, &key, &zero, BPF_NOEXIST);
		pc = bpf_map_lookup_elem(&stopping_peers, &key);
		if (!pc)
			return;
	}
	__sync_fetch_and_add(&pc->count[kind & (NET_KINDS - 1)], delta);
}

/* A refused attempt moved off NET_REFUSED (a prober's, or the namespace's
 * own call): if it was the last one counted, the last refused attempt is
 * again the one before it, so that the clients' last attempt stays theirs. */
static __always_inline void refused_moved(struct net_stats *st, struct conn_refused *r, const struct conn_key *key)
{
	r->moved = 1;
	__sync_fetch_and_add(&st->count[NET_REFUSED], -1);
	peer_count(st, r->netns, key->family, key->raddr, NET_REFUSED, -1);
	if (st->last_ns[NET_REFUSED] == r->at_ns)
		st->last_ns[NET_REFUSED] = r->prev_ns;
}

/* When a client's data last arrived on an inbound connection that ends
 * now: the socket's icsk_ack.lrcvtime (the jiffy of its last data segment,
 * set at the handshake too), turned into boot time at a tick's resolution;
 * the namespace keeps the latest (net_stats.last_data_ns). Data from
 * before the watch began is none of the stop's. */
static __always_inline void client_data(struct net_stats *st, const struct sock *sk, __u64 now)
{
	const struct inet_connection_sock *icsk = (const void *)sk;
	__u32 age;
	__u64 at;

	if (!ns_per_jiffy)
		return;
	age = (__u32)bpf_jiffies64() - BPF_CORE_READ(icsk, icsk_ack.lrcvtime);
	if ((__u64)age * ns_per_jiffy > now)
		return;
	at = now - (__u64)age * ns_per_jiffy;
	if (at >= st->begin_ns && at > st->last_data_ns)
		st->last_data_ns = at; /* a race between CPUs keeps one of two close times */
}

/* A short write still unacknowledged at a FIN may be a TLS close_notify
 * (24 to 31 bytes) or an HTTP/2 GOAWAY with it, sent after a request that
 * was never answered: who spoke last cannot be told (NET_UNDECIDED). An
 * HTTP answer with its headers is longer. */
#define SHORT_WRITE 100

/* Whether the peer's last data crossed the container's last answer: it
 * came within cross_jiffies (CROSS_MS) of it, sooner than a client that
 * read the answer would send a new request after an idle spell. A
 * request's body sent behind its headers (Nagle holds it until their
 * acknowledgement, which comes with the answer: Python's http.client) or
 * a pipelined request look like that, and so does a client reusing the
 * connection at once: who spoke last cannot be told (NET_UNDECIDED). Only
 * after an answer (bytes_acked): a request on a connection never answered
 * is unanswered however soon it came. */
static __always_inline bool crossed(const struct sock *sk)
{
	const struct inet_connection_sock *icsk = (const void *)sk;
	const struct tcp_sock *tp = (const void *)sk;
	__s32 after;

	if (!cross_jiffies || !bpf_core_field_exists(tp->bytes_acked) || !BPF_CORE_READ(tp, bytes_acked))
		return false;
	after = (__s32)(BPF_CORE_READ(icsk, icsk_ack.lrcvtime) - BPF_CORE_READ(tp, lsndtime));
	return after >= 0 && after <= (__s32)cross_jiffies;
}

/* What an inbound connection that its container's side closes with a FIN
 * (a FIN by a dying process too) leaves its client: who spoke last, from
 * the socket's sequence numbers. peer_fin: the peer had closed its side
 * first (CLOSE_WAIT), and rcv_nxt counts its FIN. */
static __always_inline __u32 fin_kind(const struct sock *sk, bool peer_fin, bool dying)
{
	const struct tcp_sock *tp = (const void *)sk;
	__u32 rcv_nxt = BPF_CORE_READ(tp, rcv_nxt) - (peer_fin ? 1 : 0);
	__u32 pending = BPF_CORE_READ(tp, write_seq) - BPF_CORE_READ(tp, snd_una);

	if (pending > 0) /* its last write not acknowledged yet */
		return dying || pending <= SHORT_WRITE ? NET_UNDECIDED : NET_CLOSED;
	if (rcv_nxt != BPF_CORE_READ(tp, snd_wl1)) { /* the peer's data came after it last acknowledged ours */
		if (crossed(sk))
			return NET_UNDECIDED; /* a request's rest or a new request: who spoke last cannot be told */
		return dying ? NET_CUT : NET_UNANSWERED;
	}
	return dying ? NET_IDLE_AT_EXIT : NET_CLOSED;
}

/* An inbound connection: a listener's child. sk_clone_lock() copies the
 * listener's sk_max_ack_backlog (listen()'s backlog) into each socket it
 * accepts; a socket that connect()ed never listened and has 0. (Not
 * SOCK_BINDPORT_LOCK: the clone clears it in the child.) */
static __always_inline bool inbound(const struct sock *sk)
{
	return BPF_CORE_READ_BITFIELD(sk, sk_max_ack_backlog) > 0; /* a direct load: on every close of a watched namespace */
}

/* The server's view of a prober's connection (struct conn_key, netns 0):
 * the prober's socket's remote end is the server's local one. */
static __always_inline void peer_key(struct conn_key *k, const struct sock *sk)
{
	const struct sock_common *c = &sk->__sk_common;

	k->family = BPF_CORE_READ(c, skc_family);
	k->lport = bpf_ntohs(BPF_CORE_READ(c, skc_dport));
	k->rport = bpf_htons(BPF_CORE_READ(c, skc_num));
	if (k->family == AF_INET6 && bpf_core_field_exists(c->skc_v6_daddr)) {
		BPF_CORE_READ_INTO(&k->laddr, c, skc_v6_daddr);
		BPF_CORE_READ_INTO(&k->raddr, c, skc_v6_rcv_saddr);
	} else {
		BPF_CORE_READ_INTO((__u32 *)k->laddr, c, skc_daddr);
		BPF_CORE_READ_INTO((__u32 *)k->raddr, c, skc_rcv_saddr);
	}
	conn_key_v4mapped(k);
}

/* A prober's connect(), in any namespace: at SYN_SENT the prober is the
 * current task, and its socket is remembered; at the handshake's end its
 * connection is, as the server will see it (probe_peers); a connect()
 * that fails on a refused SYN of a watched namespace moves that refusal
 * to the probes. Only while probers are registered, and only for the
 * state changes of a connect(). */
static __always_inline void prober_state(const struct sock *sk, int oldstate, int newstate)
{
	struct conn_key key = {};
	__u64 skp = (__u64)sk;
	__u8 one = 1;

	if (newstate == TCP_SYN_SENT) {
		__u32 tgid = bpf_get_current_pid_tgid() >> 32;

		if (bpf_map_lookup_elem(&probers, &tgid))
			bpf_map_update_elem(&prober_socks, &skp, &one, BPF_ANY);
		return;
	}
	if (!bpf_map_lookup_elem(&prober_socks, &skp))
		return;
	bpf_map_delete_elem(&prober_socks, &skp);
	if (newstate != TCP_ESTABLISHED)
		return; /* a refused one was seen at its RST (prober_refused) */
	peer_key(&key, sk);
	bpf_map_update_elem(&probe_peers, &key, &one, BPF_ANY);
}

/* A connect() of a watched namespace's socket refused: the namespace's
 * own call, by a peer elsewhere (NET_OUT_REFUSED), or by the namespace
 * itself (NET_SELF_REFUSED: its refused SYN was counted NET_REFUSED, and
 * leaves it), under the socket's cgroup: user space tells the stopping
 * container's own calls from a sidecar proxy's calls to it. */
static __always_inline void out_refused(struct net_stats *st, const struct sock *sk, __u32 netns)
{
	struct conn_refused *refused;
	struct conn_key key = {};

	peer_key(&key, sk);
	refused = bpf_map_lookup_elem(&refused_from, &key);
	if (!refused || refused->moved || refused->netns != netns || refused->begin_ns != st->begin_ns) {
		net_count_sock(st, sk, netns, NET_OUT_REFUSED, bpf_ktime_get_boot_ns());
		return;
	}
	refused_moved(st, refused, &key);
	net_count_sock(st, sk, netns, NET_SELF_REFUSED, bpf_ktime_get_boot_ns());
}

/* A RST that a prober's connect() receives in SYN_SENT: if it answered a
 * refused SYN of a watched namespace, that refusal is the probe's. Seen
 * here, before the failed socket gives its port back (tcp_set_state
 * unhashes it before the state-change tracepoint fires). */
static __always_inline bool prober_refused(const struct sock *sk)
{
	struct conn_refused *refused;
	struct conn_key key = {};
	__u64 skp = (__u64)sk;
	struct net_stats *st;

	if (!bpf_map_lookup_elem(&prober_socks, &skp))
		return false;
	peer_key(&key, sk);
	refused = bpf_map_lookup_elem(&refused_from, &key);
	if (!refused || refused->moved)
		return true;
	st = bpf_map_lookup_elem(&stopping_nets, &refused->netns);
	if (!st || st->begin_ns != refused->begin_ns)
		return true;
	refused_moved(st, refused, &key);
	__sync_fetch_and_add(&st->probes[NET_REFUSED], 1);
	return true;
}

/* Whether sk, a socket of a watched namespace, is the server's side of a
 * probe (net_stats.probes); final: its end, forgotten then. */
static __always_inline bool is_probe(const struct sock *sk, bool final)
{
	__u64 skp = (__u64)sk;

	if (!probers_on || !bpf_map_lookup_elem(&probe_socks, &skp))
		return false;
	if (final)
		bpf_map_delete_elem(&probe_socks, &skp);
	return true;
}

static __always_inline void probe_count(struct net_stats *st, __u32 kind)
{
	__sync_fetch_and_add(&st->probes[kind & (NET_KINDS - 1)], 1);
}

/* An accepted connection: a prober's (probe_peers), counted apart and its
 * socket remembered, or a client's. */
static __always_inline void accepted(struct net_stats *st, const struct sock *sk, __u32 netns, __u64 now)
{
	struct conn_key key = {};
	__u64 skp = (__u64)sk;
	__u8 one = 1;

	if (probers_on) {
		conn_key_of(&key, sk, 0);
		if (bpf_map_lookup_elem(&probe_peers, &key)) {
			bpf_map_delete_elem(&probe_peers, &key);
			bpf_map_update_elem(&probe_socks, &skp, &one, BPF_ANY);
			probe_count(st, NET_ACCEPTED);
			return;
		}
	}
	net_count_sock(st, sk, netns, NET_ACCEPTED, now);
}

/* Whether sk's change to TCP_CLOSE is that of a RST it received, which
 * handle_tcp_rst_received saw on this CPU just before. */
static __always_inline bool reset_by_peer(const struct sock *sk)
{
	__u32 zero = 0;
	__u64 *rst = bpf_map_lookup_elem(&rst_received, &zero);

	if (!rst || *rst != (__u64)sk)
		return false;
	*rst = 0;
	return true;
}

/* A listener closes. Its handshakes still under way (request sockets,
 * qlen) are connections its clients were, or will be, told are made:
 * the kernel drops each, and answers the client's next segment (the
 * handshake's ACK, or its request) with a RST from no socket, which
 * handle_tcp_rst_sent cannot tell from a stray segment of a connection
 * already gone. Counted here, as the children in its accept queue are
 * (reset by tcp_disconnect, each a state change): reset by the
 * application, or cut when a dying process's exit closed the listener.
 * Their clients' addresses are in the request sockets, not read: the
 * peers miss them. */
static __always_inline void listener_closed(struct net_stats *st, const struct sock *sk, __u32 netns, __u64 now)
{
	const struct inet_connection_sock *icsk = (const void *)sk;
	__u64 cgroup_id = net_count_sock(st, sk, netns, NET_LISTENER_CLOSED, now);
	int pending = BPF_CORE_READ(icsk, icsk_accept_queue.qlen.counter);
	__u32 kind;

	if (pending <= 0)
		return;
	kind = cur_read(current_task(), flags) & PF_EXITING ? NET_CUT : NET_RESET_SENT;
	net_count_n(st, kind, now, pending);
	net_count_cg(st, netns, cgroup_id, kind, pending);
}

/* Every TCP state change, IPv4 and IPv6. Accepted: SYN_RECV to ESTABLISHED
 * (in softirq: the namespace is the socket's, never the current task's).
 * An inbound connection ends when its side leaves ESTABLISHED or CLOSE_WAIT:
 * with a FIN (FIN_WAIT1, LAST_ACK) or an abort (CLOSE); done by a task that
 * is exiting, the kernel closed it for a dead process: cut. */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(handle_tcp_state, const struct sock *sk, const int oldstate, const int newstate)
{
	struct conn_closed closed = {};
	struct conn_key key = {};
	struct net_stats *st;
	__u32 netns, kind;
	bool dying, lost;
	__u64 now;

	if (probers_on && (newstate == TCP_SYN_SENT || oldstate == TCP_SYN_SENT))
		prober_state(sk, oldstate, newstate);
	st = stopping_net_of(sk, &netns);
	if (!st || sk->sk_protocol != IPPROTO_TCP)
		return 0;
	now = bpf_ktime_get_boot_ns();
	if (oldstate == TCP_SYN_RECV && newstate == TCP_ESTABLISHED) {
		accepted(st, sk, netns, now);
		return 0;
	}
	if (oldstate == TCP_LISTEN && newstate == TCP_CLOSE) {
		listener_closed(st, sk, netns, now);
		return 0;
	}
	if (oldstate == TCP_SYN_RECV && newstate == TCP_CLOSE && sk->__sk_common.skc_num && inbound(sk) && !reset_by_peer(sk)) {
		/* A child whose handshake the listener's close cut off (its
		 * accept queue's forget, tcp_disconnect): its client was told
		 * it is connected, and is sent a RST. A duplicate child that
		 * lost the race for its request is closed with no port
		 * (inet_csk_prepare_forced_close): not a connection. */
		kind = cur_read(current_task(), flags) & PF_EXITING ? NET_CUT : NET_RESET_SENT;
		net_count_sock(st, sk, netns, kind, now);
		conn_key_of(&key, sk, netns);
		peer_count(st, netns, key.family, key.raddr, kind, 1);
		return 0;
	}
	if (oldstate != TCP_ESTABLISHED && oldstate != TCP_CLOSE_WAIT)
		return 0;
	if (newstate != TCP_FIN_WAIT1 && newstate != TCP_LAST_ACK && newstate != TCP_CLOSE)
		return 0;
	if (!inbound(sk))
		return 0;
	if (newstate == TCP_CLOSE && reset_by_peer(sk))
		return 0; /* counted by handle_tcp_rst_received */
	dying = cur_read(current_task(), flags) & PF_EXITING;
	if (newstate == TCP_CLOSE) /* a RST: a request unread (or SO_LINGER 0) */
		kind = dying ? NET_CUT : NET_RESET_SENT;
	else
		kind = fin_kind(sk, oldstate == TCP_CLOSE_WAIT, dying);
	if (is_probe(sk, true)) {
		probe_count(st, kind);
		return 0;
	}
	client_data(st, sk, now);
	closed.cgroup_id = net_count_sock(st, sk, netns, kind, now);
	lost = kind != NET_CLOSED && kind != NET_IDLE_AT_EXIT; /* and possibly lost: undecided */
	if (!lost && (newstate == TCP_CLOSE || !every_reset))
		return 0;
	conn_key_of(&key, sk, netns);
	if (lost)
		peer_count(st, netns, key.family, key.raddr, kind, 1);
	if (newstate == TCP_CLOSE || !every_reset)
		return 0;
	closed.begin_ns = st->begin_ns;
	closed.kind = kind;
	bpf_map_update_elem(&closed_conns, &key, &closed, BPF_ANY);
	return 0;
}

/* A RST received on an open inbound connection; the state change to
 * TCP_CLOSE that follows on this CPU is then not counted again. */
SEC("tp_btf/tcp_receive_reset")
int BPF_PROG(handle_tcp_rst_received, struct sock *sk)
{
	unsigned char state;
	struct net_stats *st;
	__u32 zero = 0, netns;
	__u64 *rst;

	state = sk->__sk_common.skc_state;
	if (probers_on && state == TCP_SYN_SENT && prober_refused(sk))
		return 0; /* a probe's, not the namespace's own call */
	st = stopping_net_of(sk, &netns);
	if (!st)
		return 0;
	if (state == TCP_SYN_SENT) {
		out_refused(st, sk, netns);
		return 0;
	}
	rst = bpf_map_lookup_elem(&rst_received, &zero);
	if (state == TCP_SYN_RECV) {
		/* A child still in its handshake (Fast Open's) that its
		 * client reset: nothing of ours lost, and not a handshake
		 * the listener's close cut off (handle_tcp_state). */
		if (rst)
			*rst = (__u64)sk;
		return 0;
	}
	if (state != TCP_ESTABLISHED && state != TCP_CLOSE_WAIT)
		return 0;
	if (!inbound(sk)) {
		/* Its own call, reset by the peer it called; the CLOSE that
		 * follows is no inbound connection's. */
		net_count_sock(st, sk, netns, NET_OUT_RESET, bpf_ktime_get_boot_ns());
		return 0;
	}
	if (is_probe(sk, true))
		probe_count(st, NET_RESET_RECEIVED);
	else {
		__u64 now = bpf_ktime_get_boot_ns();

		client_data(st, sk, now);
		net_count_sock(st, sk, netns, NET_RESET_RECEIVED, now);
	}
	if (rst)
		*rst = (__u64)sk;
	return 0;
}

#define TCPHDR_SYN 0x02
#define TCPHDR_ACK 0x10

/* The destination port of the TCP segment skb carries, network order. */
static __always_inline __u16 tcp_dest(const struct sk_buff *skb)
{
	__u16 dest = 0;

	bpf_probe_read_kernel(&dest, sizeof(dest), skb->head + skb->transport_header + 2);
	return dest;
}

/* A RST that answers a request on a connection the container's side had
 * closed: the socket is the closed one, orphaned (TCP_ABORT_ON_DATA), or
 * the timewait socket that took its place (TCP_TIMEWAIT_SOCKET), on every
 * kernel. Counted once per connection, and moved from the kind its close
 * was counted as when that one lost nothing. */
static __always_inline void after_close(const struct sock *sk, const struct sk_buff *skb, struct net_stats *st, __u32 netns)
{
	unsigned char state = sk->__sk_common.skc_state;
	struct conn_closed *closed;
	struct conn_key key = {};

	/* Closed on this side: orphaned, or a timewait socket. A RST of an
	 * open connection (an out-of-window segment) is none of these. */
	if (state == TCP_ESTABLISHED || state == TCP_CLOSE_WAIT || state == TCP_LISTEN || state == TCP_SYN_RECV)
		return;
	conn_key_of(&key, sk, netns);
	/* An orphan the abort destroyed has given its port back (inet_num is
	 * 0 then): the request's own destination port is the local one. */
	key.lport = bpf_ntohs(tcp_dest(skb));
	closed = bpf_map_lookup_elem(&closed_conns, &key);
	if (!closed || closed->begin_ns != st->begin_ns || closed->late)
		return;
	closed->late = 1;
	if (closed->kind == NET_UNANSWERED || closed->kind == NET_CUT)
		return; /* its loss is counted already: the client failed once */
	__sync_fetch_and_add(&st->count[closed->kind & (NET_KINDS - 1)], -1);
	net_count_cg(st, netns, closed->cgroup_id, closed->kind, -1);
	net_count(st, NET_AFTER_CLOSE, bpf_ktime_get_boot_ns());
	net_count_cg(st, netns, closed->cgroup_id, NET_AFTER_CLOSE, 1);
	if (closed->kind == NET_UNDECIDED)
		peer_count(st, netns, key.family, key.raddr, NET_UNDECIDED, -1);
	peer_count(st, netns, key.family, key.raddr, NET_AFTER_CLOSE, 1);
}

/* A refused SYN's source, remembered while probers are registered: a
 * prober's connect() that fails on it moves the count (prober_state). */
static __always_inline void refused_syn(struct net_stats *st, const struct sk_buff *skb, __u32 netns, __u64 now, __u64 prev)
{
	struct conn_refused r = {.begin_ns = st->begin_ns, .netns = netns, .at_ns = now, .prev_ns = prev};
	unsigned char *head = skb->head;
	struct conn_key key = {};
	__u16 nh = skb->network_header, th = skb->transport_header;
	__u8 version = 0;
	__u16 port = 0;

	bpf_probe_read_kernel(&version, 1, head + nh);
	if (version >> 4 == 4) {
		key.family = AF_INET;
		bpf_probe_read_kernel(key.raddr, 4, head + nh + 12);
		bpf_probe_read_kernel(key.laddr, 4, head + nh + 16);
	} else {
		key.family = AF_INET6;
		bpf_probe_read_kernel(key.raddr, 16, head + nh + 8);
		bpf_probe_read_kernel(key.laddr, 16, head + nh + 24);
	}
	bpf_probe_read_kernel(&key.rport, 2, head + th);
	bpf_probe_read_kernel(&port, 2, head + th + 2);
	key.lport = bpf_ntohs(port);
	bpf_map_update_elem(&refused_from, &key, &r, BPF_ANY);
	peer_count(st, netns, key.family, key.raddr, NET_REFUSED, 1);
}

/* A RST the kernel sends, in a watched namespace (the socket's, else that
 * of the device the segment it answers came in on). A SYN so answered is a refused
 * connection attempt: nothing listened. Where no socket matched (sk NULL),
 * since Linux 6.10 only: earlier kernels never call this with a NULL sk,
 * and user space says the kernel cannot tell refused attempts there. A SYN
 * that finds the timewait socket of an earlier connection of the same
 * addresses (a client that reuses its port) is answered by that socket,
 * on every kernel: refused too. Any other segment answered by a socket: a
 * request after a close (after_close). */
SEC("tp_btf/tcp_send_reset")
int BPF_PROG(handle_tcp_rst_sent, const struct sock *sk, const struct sk_buff *skb)
{
	struct net_stats *st;
	struct net *net;
	__u8 flags = 0;
	__u32 netns;

	if (!skb)
		return 0;
	if (sk) {
		/* tcp_v4_rcv clears skb->dev before it hands the segment
		 * to a full socket: the socket's namespace. */
		st = stopping_net_of(sk, &netns);
	} else {
		net = skb->dev->nd_net.net;
		netns = net->ns.inum;
		st = watched_net(bpf_map_lookup_elem(&stopping_nets, &netns), net_gen(net));
	}
	if (!st)
		return 0; /* outside a stop: this one look-up */
	bpf_probe_read_kernel(&flags, 1, skb->head + skb->transport_header + 13);
	if ((flags & (TCPHDR_SYN | TCPHDR_ACK)) == TCPHDR_SYN) {
		__u64 now = bpf_ktime_get_boot_ns(), prev = st->last_ns[NET_REFUSED];

		net_count(st, NET_REFUSED, now);
		refused_syn(st, skb, netns, now, prev);
	} else if (sk && every_reset)
		after_close(sk, skb, st, netns); /* before 6.10 a timewait socket's RST is not traced: none, rather than some */
	return 0;
}

/* What the tasks of a process were doing at a stop signal or a SIGKILL that
 * came to its namespace's init from outside (the runtime's): one
 * EV_BLOCKED record (struct event, as sigscope.h says) for its main thread,
 * for up to BLOCKED_THREADS others and for up to BLOCKED_CHILDREN children.
 * User space compares the two captures of a stop: the CPU time each thread
 * used in between tells a process making progress from one blocked, and the
 * system call a blocked one sleeps in tells in what. Only on those signals:
 * a few records per container stop, every read a helper read (the tasks
 * come from kernel lists, not from BTF pointers). x86_64: the system call
 * number and argument are read from the user registers saved at the top of
 * the task's kernel stack. */
#define BLOCKED_THREADS 3
#define BLOCKED_CHILDREN 4
#define X86_64_THREAD_SIZE 16384 /* THREAD_SIZE without KASAN, as distributions build */
#define SIGHUP 1
#define S_IFMT 00170000
#define SYS_READ 0
#define SYS_READV 19
#define SYS_PREAD64 17
#define SYS_ACCEPT 43
#define SYS_RECVFROM 45
#define SYS_RECVMSG 47
#define SYS_ACCEPT4 288

/* A task's disposition of sig: 0 default, 1 ignored, 2 handler. */
static __always_inline __u8 disposition(struct task_struct *t, int sig)
{
	void *sh = BPF_CORE_READ(t, sighand);
	void *h = 0;

	if (!sh)
		return 0;
	bpf_probe_read_kernel(&h, sizeof(h), sh + bpf_core_field_offset(struct sighand_struct, action) +
					       array_off(sig - 1, bpf_core_type_size(struct k_sigaction)) +
					       bpf_core_field_offset(struct k_sigaction, sa.sa_handler));
	return handler_class(h);
}

/* One blocked record. A global function (verified once, on its own, with
 * scalar arguments), as is note_blocked: inlined at each of its callers
 * they made the tracer's load take a minute. how packs the killed tgid
 * (bits 32-63), the role (24-31), the thread count (16-23) and the facts
 * >> 14 (0-1). */
__noinline int blocked_record(__u64 task, __u64 ts, __u64 how)
{
	struct task_struct *t = (void *)task;
	struct counters *c = counters_get();
	__u32 killed = how >> 32, facts = (how & 3) << 14;
	__u8 role = how >> 24, threads = how >> 16;
	struct event *e;
	struct pid *p;
	void *stack;
	__u32 level;
	long nr = -2; /* -2: not read (no stack, or not x86_64); -1: no system call */
	__u64 a0 = 0;

	if (!c)
		return 0;
	e = reserve(c, EV_BLOCKED);
	if (!e)
		return 0;
	e->ts_ns = ts; /* the signal's own record's: user space pairs them */
	e->signo = 0;
	e->result = role;
	e->facts = facts;
	e->ancestors_len = threads;
	e->sig_flags = 0;
	zero_proc(&e->sender);
	zero_proc(&e->target);
	e->sender.pid = killed;
	e->target.pid = BPF_CORE_READ(t, tgid);
	e->target.tid = BPF_CORE_READ(t, pid);
	p = BPF_CORE_READ(t, thread_pid);
	level = BPF_CORE_READ(p, level);
	bpf_probe_read_kernel(&e->target.ns_pid, sizeof(e->target.ns_pid),
			      (void *)upid_at(p, level) + bpf_core_field_offset(struct upid, nr));
	BPF_CORE_READ_STR_INTO(&e->target.comm, t, comm);
	/* The CPU time it has used (ns): its growth between the stop signal
	 * and the SIGKILL is the progress it made. sender.tid: on a CPU now. */
	e->sender.cgroup_id = BPF_CORE_READ(t, se.sum_exec_runtime);
	e->sender.tid = BPF_CORE_READ(t, on_cpu);
	stack = BPF_CORE_READ(t, stack);
	/* x86_64's register names: elsewhere (arm64's pt_regs has neither)
	 * the relocation fails and this is left out, not the load. */
	if (stack && bpf_core_field_exists(((struct pt_regs *)0)->orig_ax) && bpf_core_field_exists(((struct pt_regs *)0)->di)) {
		struct pt_regs *regs = stack + X86_64_THREAD_SIZE - bpf_core_type_size(struct pt_regs);

		nr = BPF_CORE_READ(regs, orig_ax);
		a0 = BPF_CORE_READ(regs, di);
	}
	e->si_code = (__s32)nr;
	e->sender.cgroup_v1_id = a0;
	e->exit_code = (__s32)a0;
	e->netns = 0;
	if ((nr == SYS_READ || nr == SYS_READV || nr == SYS_PREAD64 || nr == SYS_ACCEPT || nr == SYS_ACCEPT4 ||
	     nr == SYS_RECVFROM || nr == SYS_RECVMSG) &&
	    a0 < 65536) {
		struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
		struct file **fds = BPF_CORE_READ(fdt, fd);
		struct file *f = 0;

		if (a0 < BPF_CORE_READ(fdt, max_fds)) {
			bpf_probe_read_kernel(&f, sizeof(f), (void *)fds + (a0 & 0xffff) * sizeof(f));
			if (f)
				e->netns = (BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT) >> 12;
		}
	}
	e->group = 0;
	e->handler = 0;
	if (role == BLOCKED_CHILD) {
		e->handler = disposition(t, SIGTERM);
		e->sig_flags = disposition(t, SIGHUP) | disposition(t, SIGINT) << 2 | disposition(t, SIGQUIT) << 4 |
			       (__u32)e->handler << 6;
	}
	submit(c, e, EV_BLOCKED);
	return 0;
}

/* Keeps p, which entered the pid namespace pidns from outside, in one of
 * the namespace's EXEC_SLOTS (the oldest goes). */
static __always_inline void note_exec(__u32 pidns, struct task_struct *p, __u32 tgid)
{
	struct exec_slots *s = bpf_map_lookup_elem(&ns_execs, &pidns);
	__u32 i;

	if (!s) {
		struct exec_slots none = {};

		bpf_map_update_elem(&ns_execs, &pidns, &none, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&ns_execs, &pidns);
		if (!s)
			return;
	}
	i = s->next % EXEC_SLOTS;
	s->task[i] = (__u64)p;
	s->start_time[i] = BPF_CORE_READ(p, start_time);
	s->tgid[i] = tgid;
	s->next = i + 1;
}

static __always_inline __u64 blocked_how(__u32 killed, __u8 role, __u8 threads, __u32 facts)
{
	return (__u64)killed << 32 | (__u64)role << 24 | (__u64)threads << 16 | ((facts >> 14) & 3);
}

/* The processes that entered the namespace of the init at leader_addr from
 * outside and still run (a preStop exec hook the grace ran out on), each
 * with up to two children: what they were doing. A slot whose task is gone
 * (its tgid or start time differ: the memory may be another task's by now)
 * or exiting is passed over. */
__noinline int note_execs(__u64 leader_addr, __u64 ts)
{
	struct task_struct *leader = (void *)leader_addr;
	__u32 killed = BPF_CORE_READ(leader, tgid);
	struct pid *lp = BPF_CORE_READ(leader, thread_pid);
	struct pid_namespace *ns = 0;
	struct exec_slots *s;
	__u32 level, inum;
	void *head, *next, *t, *c;
	int i, j;

	if (!lp)
		return 0;
	level = BPF_CORE_READ(lp, level);
	bpf_probe_read_kernel(&ns, sizeof(ns), (void *)upid_at(lp, level) + bpf_core_field_offset(struct upid, ns));
	if (!ns)
		return 0;
	inum = BPF_CORE_READ(ns, ns.inum);
	s = bpf_map_lookup_elem(&ns_execs, &inum);
	if (!s)
		return 0;
	for (i = 0; i < EXEC_SLOTS; i++) {
		t = (void *)s->task[i];
		if (!t || BPF_CORE_READ((struct task_struct *)t, tgid) != s->tgid[i] ||
		    BPF_CORE_READ((struct task_struct *)t, start_time) != s->start_time[i] ||
		    (BPF_CORE_READ((struct task_struct *)t, flags) & PF_EXITING))
			continue;
		blocked_record((__u64)t, ts, blocked_how(killed, BLOCKED_EXEC, i, 0));
		head = t + bpf_core_field_offset(struct task_struct, children);
		next = BPF_CORE_READ((struct task_struct *)t, children.next);
		for (j = 0; j < 2 && next && next != head; j++) {
			c = next - bpf_core_field_offset(struct task_struct, sibling);
			blocked_record((__u64)c, ts, blocked_how(killed, BLOCKED_EXEC_CHILD, i, 0));
			next = BPF_CORE_READ((struct task_struct *)c, sibling.next);
		}
	}
	return 0;
}

/* The capture itself, for the process whose group leader is at leader,
 * when the signal (the generate record's facts, and its signal and result
 * from bit 32 and 40 of what) calls for it: 1 when it did. */
__noinline int note_blocked(__u64 leader_addr, __u64 ts, __u64 what)
{
	struct task_struct *leader = (void *)leader_addr;
	__u32 sig_facts = what, sig = (what >> 32) & 63, result = (what >> 40) & 7;
	__u32 killed, facts = 0;
	int nthreads;
	__u8 nt;
	void *head, *next, *t;
	int i, n = 0;

	if ((sig_facts & (FACT_TARGET_NS_INIT | FACT_SENDER_IN_TARGET_NS | FACT_TARGET_GONE)) != FACT_TARGET_NS_INIT || result != 0 ||
	    !((NET_STOP_SIGNALS >> ((sig - 1) & 63)) & 1) || !leader || (BPF_CORE_READ(leader, flags) & PF_EXITING))
		return 0;
	killed = BPF_CORE_READ(leader, tgid);
	nthreads = BPF_CORE_READ(leader, signal, nr_threads);
	nt = nthreads > 255 ? 255 : nthreads;

	blocked_record(leader_addr, ts, blocked_how(killed, BLOCKED_MAIN, nt, 0));
	/* Its other threads, in signal->thread_head through thread_node. */
	head = (void *)BPF_CORE_READ(leader, signal) + bpf_core_field_offset(struct signal_struct, thread_head);
	next = BPF_CORE_READ(leader, signal, thread_head.next);
	for (i = 0; i < BLOCKED_THREADS + 1 && next && next != head; i++) {
		t = next - bpf_core_field_offset(struct task_struct, thread_node);
		if (t != leader) {
			if (n == BLOCKED_THREADS) {
				facts |= FACT_MORE_THREADS;
				break;
			}
			blocked_record((__u64)t, ts, blocked_how(killed, BLOCKED_THREAD, 0, 0));
			n++;
		}
		next = BPF_CORE_READ((struct task_struct *)t, thread_node.next);
	}
	/* Its main thread's children, through sibling. */
	head = (void *)leader + bpf_core_field_offset(struct task_struct, children);
	next = BPF_CORE_READ(leader, children.next);
	for (i = 0; i < BLOCKED_CHILDREN && next && next != head; i++) {
		t = next - bpf_core_field_offset(struct task_struct, sibling);
		blocked_record((__u64)t, ts, blocked_how(killed, BLOCKED_CHILD, 0, 0));
		next = BPF_CORE_READ((struct task_struct *)t, sibling.next);
	}
	if (next && next != head)
		facts |= FACT_MORE_CHILDREN;
	if (facts)
		/* The truncation, on a main-thread record of its own. */
		blocked_record(leader_addr, ts, blocked_how(killed, BLOCKED_MAIN, nt, facts));
	return 1;
}

/* Trusted pointers. handle_generate runs for every traced signal, inside
 * kill(2): cur and task stay the kernel's trusted pointers, so that what it
 * reads of them and of their RCU-safe fields (see untrusted()) are plain
 * loads, not guarded ones. The verifier pays for that where a pointer is
 * loaded through a trusted one, on every path that reaches the load, and
 * past its first branches this program has hundreds of paths: every pointer
 * field the common path reads of the two tasks is read at the top, once,
 * in a straight line, and below it cur and task are read for their scalar
 * fields only (tgid, pid, flags, the masks, comm). What runs only for some
 * signals (a stop signal's network namespace, an exiting sender's ns_empty,
 * a namespaced task's group leader) reads through untrusted() views. With
 * every read of the program untrusted (2026-11-28 until issue 37), an
 * emitted signal's program ran 1.77 times the stamped floor's (make bench
 * -bpf-stats, one run, medians of 9 rounds: 526 against 297 ns), and 1.46
 * times so (422 against 289 ns); the verifier takes what it took then
 * (0.15-0.25 s here; 2.3 s with every read trusted). */
SEC("tp_btf/signal_generate")
int BPF_PROG(handle_generate, int sig, struct kernel_siginfo *info, struct task_struct *task,
	     int group, int result)
{
	struct task_struct *cur;
	__u32 cur_tgid, tgt_tgid;
	struct counters *c;
	struct event *e;

	if (!signal_traced(sig)) {
		/* Untraced: only an exiting init's SIGCHLD to its parent matters
		 * (an init whose exit signal is another, set by clone(), is left
		 * to the engine's settle time). One compare for every other. */
		if (sig == SIGCHLD) {
			cur = current_task();
			if (cur_read(cur, flags) & PF_EXITING)
				note_ns_empty(sig, info, cur, task);
		}
		return 0;
	}
	cur = current_task();
	cur_tgid = cur_read(cur, tgid);
	tgt_tgid = task->tgid;
	if (cur_tgid == self_tgid || tgt_tgid == self_tgid)
		return 0;
	if (filter_pid && cur_tgid != filter_pid && tgt_tgid != filter_pid)
		return 0;
	if (filter_comm[0] && !task_comm_matches(cur) && !comm_matches(task->comm))
		return 0;
	c = counters_get();
	if (!c)
		return 0;
	e = reserve(c, EV_GENERATE);
	if (!e)
		return 0;

	/* Every pointer this path reads of the two tasks, read here, once, in
	 * a straight line (see "Trusted pointers" above handle_generate). */
	struct pid *cp = cur_read(cur, thread_pid), *tp = task->thread_pid;
	struct css_set *ccs = cur_read(cur, cgroups), *tcs = task->cgroups;
	__u64 ccg = cur_read(ccs, dfl_cgrp, kn, id), tcg = tcs->dfl_cgrp->kn->id;
	struct cgroup_subsys_state *cmem = memory_css(ccs, true), *tmem = memory_css(tcs, false);
	struct signal_struct *tsig = task->signal;
	struct nsproxy *tnsp = task->nsproxy;
	/* Only an address (read_at): through the untrusted view, which never
	 * makes it a pointer the verifier wants NULL-checked (sighand is
	 * __rcu, for kernels whose BTF says so). */
	void *sighand = untrusted(struct task_struct, task)->sighand;
	__u64 tgt_start = task->group_leader->start_time;
	{
		struct task_struct *anc[MAX_ANCESTORS];

		read_ancestors(anc, cur);
		fill_ancestors_read(e, anc);
	}

	e->signo = sig;
	e->result = result;
	e->group = group;

	__u32 facts = 0;
	if (info == (void *)0) {
		facts |= FACT_INFO_NOINFO;
		e->si_code = SI_USER;
	} else if (info == (void *)1) {
		facts |= FACT_INFO_PRIV;
		e->si_code = SI_KERNEL;
	} else {
		/* Some kernels type this argument as a scalar: see read_at. */
		e->si_code = read_at(struct kernel_siginfo, info, si_code);
	}

	/* The target's handler table and blocked mask are stable: the tracepoint
	 * runs under its siglock. action[] is indexed at run time: read_at. */
	__u64 act = array_off(sig - 1, bpf_core_type_size(struct k_sigaction));
	e->handler = handler_class(read_at(struct k_sigaction,
					   sighand + bpf_core_field_offset(struct sighand_struct, action) + act,
					   sa.sa_handler));
	e->sig_flags = tsig->flags;
	if ((task->blocked.sig[0] >> ((sig - 1) & 63)) & 1)
		facts |= FACT_BLOCKED;
	else if ((task->real_blocked.sig[0] >> ((sig - 1) & 63)) & 1)
		/* sigtimedwait/sigwaitinfo moved the waited set out of blocked
		 * into real_blocked: sig_ignored() checks both, so the signal is
		 * queued for the waiter even with SIG_DFL at a namespace init. */
		facts |= FACT_SIGWAITED;
	if (cur_read(cur, flags) & PF_EXITING)
		facts |= FACT_SENDER_EXITING;
	/* A signal to a process that is already gone (a zombie) must not
	 * begin a stop: its end was already recorded. */
	if (tsig->live.counter == 0)
		facts |= FACT_TARGET_GONE;

	__u32 cur_level = cur_read(cp, level), tgt_level = tp->level;
	fill_proc_read(&e->sender, cur, cp, ccg, cmem, cur_level, true);
	fill_proc_read(&e->target, task, tp, tcg, tmem, tgt_level, false);
	/* The reaper test only matters for the cascade, whose sender is exiting. */
	if (facts & FACT_SENDER_EXITING) {
		struct pid_namespace *ns = ns_at(cp, cur_level);
		if (ns && read_at(struct pid_namespace, ns, child_reaper) == cur)
			facts |= FACT_SENDER_REAPER;
	}
	if (pid_reaches(tp, tgt_level, cp, cur_level))
		facts |= FACT_TARGET_IN_SENDER_NS;
	if (pid_reaches(cp, cur_level, tp, tgt_level))
		facts |= FACT_SENDER_IN_TARGET_NS;
	if (tgt_level > 0)
		facts |= FACT_TARGET_NS_CHILD;
	if (e->target.ns_pid == 1)
		facts |= FACT_TARGET_NS_INIT;
	e->netns = watch_net(sig, cur, task, nsproxy_netns(tnsp, false), e->ts_ns, &facts);
	e->facts = facts;

	/* A stop signal or SIGKILL from the runtime (outside the pid
	 * namespace) to a namespace init that is alive: what its tasks were
	 * doing (note_blocked, after this record). Decided here, so that the
	 * verifier need not keep every path's facts alive past the submit. */
	__u64 ts = e->ts_ns, want = facts;

	submit(c, e, EV_GENERATE);
	mark_targeted(tgt_tgid, tgt_start);
	if (facts & FACT_SENDER_EXITING)
		note_ns_empty(sig, info, untrusted(struct task_struct, cur), untrusted(struct task_struct, task));
	/* The tests are note_blocked's: the verifier checks a global function
	 * once, and its scalar arguments' values keep no path of this program
	 * apart from another. */
	if ((NET_STOP_SIGNALS >> ((sig - 1) & 63)) & 1) { /* a stop signal or SIGKILL: rare */
		__u64 leader = (__u64)BPF_CORE_READ(task, group_leader);

		/* One after the other, not one inside the other: the kernels
		 * before 6.13 allow 512 bytes of stack for a whole chain of
		 * calls, and this program's own takes 336 of them. */
		if (note_blocked(leader, ts, want | (__u64)(sig & 63) << 32 | (__u64)(result & 7) << 40))
			note_execs(leader, ts);
	}
	return 0;
}

SEC("tp_btf/signal_deliver")
int BPF_PROG(handle_deliver, int sig, struct kernel_siginfo *info, struct k_sigaction *ka)
{
	struct task_struct *cur;
	__u32 cur_tgid;
	struct counters *c;
	struct event *e;

	/* A group exit makes every thread report (SIGKILL, SEND_SIG_NOINFO,
	 * SIG_DFL) whatever the real cause (a fatal SIGTERM, exit_group, exec):
	 * one false record per thread of every exiting multi-threaded process.
	 * A real dequeue always passes its siginfo. The exit event carries the
	 * true cause, so these are dropped here. */
	if (!info || !signal_traced(sig))
		return 0;
	cur = untrusted(struct task_struct, current_task());
	cur_tgid = cur_read(cur, tgid);
	if (cur_tgid == self_tgid)
		return 0;
	if (filter_pid && cur_tgid != filter_pid)
		return 0;
	if (filter_comm[0] && !task_comm_matches(cur))
		return 0;
	c = counters_get();
	if (!c)
		return 0;
	e = reserve(c, EV_DELIVER);
	if (!e)
		return 0;

	e->signo = sig;
	e->si_code = read_at(struct kernel_siginfo, info, si_code); /* see handle_generate */
	e->handler = handler_class(read_at(struct k_sigaction, ka, sa.sa_handler));
	e->sig_flags = cur_read(cur, signal, flags);
	zero_proc(&e->sender);
	__builtin_memset(e->ancestors, 0, sizeof(e->ancestors));
	__u32 level = cur_read(cur, thread_pid, level);
	fill_proc(&e->target, cur, level, true);
	if (level > 0)
		e->facts |= FACT_TARGET_NS_CHILD;
	if (e->target.ns_pid == 1)
		e->facts |= FACT_TARGET_NS_INIT;
	submit(c, e, EV_DELIVER);
	return 0;
}

static __always_inline int handle_exit(struct task_struct *p, bool group_dead, bool dedup)
{
	p = untrusted(struct task_struct, p);
	__u32 tgid = p->tgid;
	int code = p->exit_code;
	struct counters *c;
	struct event *e;
	__u32 level;

	if (!group_dead || tgid == self_tgid)
		return 0;
	if (filter_pid && tgid != filter_pid)
		return 0;

	/* Only processes that matter: killed by a signal, living in a container
	 * (a non-root pid namespace), or the target of a traced signal. A host
	 * busy with fork/exit must not flood the reader. */
	level = p->thread_pid->level;
	bool was_targeted = bpf_map_lookup_elem(&targeted, &tgid) != NULL;
	if (!(code & 0x7f) && level == 0 && !was_targeted)
		return 0;
	if (filter_comm[0] && !comm_matches(p->comm))
		return 0;
	if (was_targeted)
		bpf_map_delete_elem(&targeted, &tgid);
	if (dedup) {
		__u64 start = p->group_leader->start_time;
		__u64 *prev = bpf_map_lookup_elem(&exited, &tgid);
		if (prev && *prev == start)
			return 0;
		bpf_map_update_elem(&exited, &tgid, &start, BPF_ANY);
	}

	c = counters_get();
	if (!c)
		return 0;
	e = reserve(c, EV_EXIT);
	if (!e)
		return 0;
	e->signo = 0;
	e->exit_code = code;
	e->sig_flags = p->signal->flags;
	e->facts = FACT_GROUP_DEAD | (level > 0 ? FACT_TARGET_NS_CHILD : 0);
	zero_proc(&e->sender);
	__builtin_memset(e->ancestors, 0, sizeof(e->ancestors));
	fill_proc(&e->target, p, level, false);
	if (e->target.ns_pid == 1)
		e->facts |= FACT_TARGET_NS_INIT;
	submit(c, e, EV_EXIT);
	return 0;
}

/* Kernels before 6.16: sched_process_exit(struct task_struct *p). The group is
 * dead when no thread is left alive; two threads can see that at once, so
 * de-duplicate per tgid. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_exit_v1, struct task_struct *p)
{
	return handle_exit(p, p->signal->live.counter == 0, true);
}

/* 6.16 and later: sched_process_exit(struct task_struct *p, bool group_dead). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_exit_v2, struct task_struct *p, bool group_dead)
{
	return handle_exit(p, group_dead, false);
}

/* The counters are looked up before reserving: a NULL check after the
 * reserve would leave a path that leaks the reservation, which verifiers
 * before 6.x reject ("Unreleased reference"). */
static __always_inline struct event *oom_event(struct counters *c, __u32 tgid)
{
	struct event *e;

	if (filter_pid && tgid != filter_pid)
		return NULL;
	e = reserve(c, EV_OOM);
	if (!e)
		return NULL;
	e->signo = 0;
	e->sig_flags = 0;
	zero_proc(&e->sender);
	__builtin_memset(e->ancestors, 0, sizeof(e->ancestors));
	return e;
}

/* Kernels whose tracepoint passes only the victim's pid (a thread id in the
 * root namespace): user space completes the rest from /proc. */
SEC("tp_btf/mark_victim")
int BPF_PROG(handle_oom_v1, int pid)
{
	struct counters *c = counters_get();
	struct event *e;

	if (!c)
		return 0;
	e = oom_event(c, pid);
	if (!e)
		return 0;
	zero_proc(&e->target);
	e->target.pid = pid;
	e->target.tid = pid;
	submit(c, e, EV_OOM);
	return 0;
}

/* mark_victim(struct task_struct *task, uid_t uid): Debian's 6.1, 6.12 and
 * 6.18 builds all have this form. */
SEC("tp_btf/mark_victim")
int BPF_PROG(handle_oom_v2, struct task_struct *task, unsigned int uid)
{
	struct counters *c = counters_get();
	struct event *e;
	__u32 level;

	if (!c)
		return 0;
	task = untrusted(struct task_struct, task);
	e = oom_event(c, task->tgid);
	if (!e)
		return 0;
	level = task->thread_pid->level;
	fill_proc(&e->target, task, level, false);
	if (level > 0)
		e->facts |= FACT_TARGET_NS_CHILD;
	if (e->target.ns_pid == 1)
		e->facts |= FACT_TARGET_NS_INIT;
	submit(c, e, EV_OOM);
	return 0;
}

/* An exec by a process whose parent has no pid in its pid namespace: it
 * entered the namespace from outside, as runc exec's process does (a
 * Kubernetes exec preStop hook, kubectl exec, an exec probe) and as a
 * container's first process does. A host exec costs one comparison; an exec
 * inside a container, a few loads more. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_exec, struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	struct task_struct *parent;
	__u32 level, plevel, tgid;
	struct counters *c;
	struct event *e;

	p = untrusted(struct task_struct, p);
	level = p->thread_pid->level;
	if (level == 0)
		return 0;
	tgid = p->tgid;
	if (tgid == self_tgid || (filter_pid && tgid != filter_pid))
		return 0;
	parent = p->real_parent;
	if (!parent)
		return 0;
	plevel = parent->thread_pid->level;
	if (pid_reaches(parent->thread_pid, plevel, p->thread_pid, level))
		return 0; /* started inside the namespace */
	if (filter_comm[0] && !comm_matches(p->comm))
		return 0;
	c = counters_get();
	if (!c)
		return 0;
	e = reserve(c, EV_EXEC);
	if (!e)
		return 0;
	e->signo = 0;
	e->sig_flags = 0;
	fill_proc(&e->target, p, level, false);
	fill_proc(&e->sender, parent, plevel, false);
	fill_ancestors(e, parent);
	e->facts = FACT_TARGET_NS_CHILD | (e->target.ns_pid == 1 ? FACT_TARGET_NS_INIT : 0);
	e->netns = task_netns(p, false); /* a preStop hook's: user space may begin the count at it */
	if (e->netns && e->netns == task_netns(parent, false))
		e->facts |= FACT_NET_SHARED; /* not the container's own: never counted */
	__u32 pidns = e->target.pidns, ns_pid = e->target.ns_pid;
	submit(c, e, EV_EXEC);
	if (ns_pid != 1 && pidns)
		note_exec(pidns, p, tgid);
	return 0;
}
