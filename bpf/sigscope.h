/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The one definition of what crosses the ring buffer. bpf2go generates the Go
 * types from these structs (-type event -type counters -type net_stats); never mirror them by hand.
 */
#ifndef __SIGSCOPE_H__
#define __SIGSCOPE_H__

#define TASK_COMM_LEN 16
#define MAX_ANCESTORS 4

enum event_type {
	EV_GENERATE = 0,
	EV_DELIVER = 1,
	EV_EXIT = 2,
	EV_OOM = 3,   /* oom:mark_victim: the OOM killer chose target */
	EV_EXEC = 4,  /* sched_process_exec of a process that entered its pid namespace from outside */
	EV_NS_EMPTY = 5, /* a dying namespace init notified its parent: every other process of its namespace is gone */
	EV_NET = 6,   /* never in the ring: user space reads a stopping namespace's struct net_stats; its counters stay 0 */
	EV_BLOCKED = 7, /* what a task was doing when a SIGKILL came to its namespace's init from outside: one record per task (see struct event) */
	EV_TYPES = 8, /* room for later hooks; counters are indexed by type */
};

/*
 * Raw facts read in the kernel. User space turns them into the verdict flags
 * (pid1_ignored, ns_cascade, ...) in exactly one place: tracer/sigvocab/classify.go.
 */
enum fact {
	FACT_INFO_NOINFO = 1 << 0,          /* info == SEND_SIG_NOINFO */
	FACT_INFO_PRIV = 1 << 1,            /* info == SEND_SIG_PRIV (kernel) */
	FACT_SENDER_EXITING = 1 << 2,       /* current has PF_EXITING */
	FACT_SENDER_REAPER = 1 << 3,        /* current is child_reaper of its pid ns */
	FACT_TARGET_IN_SENDER_NS = 1 << 4,  /* target has a pid in current's pid ns */
	FACT_SENDER_IN_TARGET_NS = 1 << 5,  /* current has a pid in target's pid ns */
	FACT_TARGET_NS_INIT = 1 << 6,       /* target's tgid is 1 in its pid ns */
	FACT_BLOCKED = 1 << 7,              /* target blocks the signal */
	FACT_GROUP_DEAD = 1 << 8,           /* exit: last thread of the group */
	FACT_TARGET_NS_CHILD = 1 << 9,      /* target lives in a non-root pid ns */
	FACT_SIGWAITED = 1 << 10,           /* target waits for it: in real_blocked (sigtimedwait), not in blocked */
	FACT_TARGET_GONE = 1 << 11,         /* every thread of the target has exited (signal->live == 0) */
	FACT_NET_WATCHED = 1 << 12,         /* generate: the target's network namespace is in stopping_nets (its connections are counted) */
	FACT_MORE_THREADS = 1 << 14,        /* blocked: the process has threads no record shows */
	FACT_MORE_CHILDREN = 1 << 15,       /* blocked: the process has children no record shows */
	FACT_NET_SHARED = 1 << 13,          /* generate (a stop signal from outside the target's pid namespace), exec (from outside it): the target shares the sender's or parent's network namespace (--network host), whose connections are not the container's alone: not counted */
};

/*
 * What the kernel counts of a stopping container's TCP connections, per
 * network namespace (the value of the stopping_nets map). An inbound
 * connection is counted once, when it ends on the container's side, by who
 * spoke last on it (the socket's sequence numbers: docs/kernel.md); a
 * request that arrives after the container closed it moves it to
 * NET_AFTER_CLOSE. Values are never renumbered: user space, the journal
 * and the metrics name them.
 */
enum net_kind {
	NET_ACCEPTED = 0,       /* a handshake completed on a listening socket of the namespace */
	NET_CLOSED = 1,         /* closed with a FIN by the container's side, its process alive, after it spoke last (an answer, or an idle keep-alive connection): no request lost */
	NET_RESET_SENT = 2,     /* aborted (RST) by the container's side, its process alive: a request unread (abort on close), SO_LINGER 0, or queued or in its handshake at its listener's close */
	NET_RESET_RECEIVED = 3, /* reset by the peer: the client's choice */
	NET_CUT = 4,            /* open at its process's death with a request in it, unread or read and unanswered: the kernel closed it */
	NET_REFUSED = 5,        /* a SYN answered with a RST: nothing listened (Linux 6.10 and later) */
	NET_LISTENER_CLOSED = 6, /* a listening socket closed: the application stopped accepting */
	NET_UNANSWERED = 7,     /* closed with a FIN, its process alive, after the client spoke last: a request read and never answered (the keep-alive race) */
	NET_AFTER_CLOSE = 8,    /* a request that arrived after the container's side had closed the connection, answered with a RST (the keep-alive race) */
	NET_IDLE_AT_EXIT = 9,   /* open at its process's death, idle (the container had spoken last, all of it acknowledged): no request lost */
	NET_UNDECIDED = 10,     /* who spoke last cannot be told: a FIN right after a short write not yet acknowledged (a TLS close_notify, an HTTP/2 GOAWAY), or any write in flight at the death */
	NET_OUT_REFUSED = 11,   /* a connect() from a socket of the namespace refused by a peer elsewhere (its own call: a database, a service that stopped first) */
	NET_OUT_RESET = 12,     /* a connection a socket of the namespace opened, reset by its peer */
	NET_SELF_REFUSED = 13,  /* a connect() from a socket of the namespace refused by the namespace itself (localhost: a sidecar that stopped first, or a sidecar proxy's call to the application): taken off NET_REFUSED, split by cgroup so that user space tells whose call it was */
	NET_KINDS = 16,
};

struct net_stats {
	__u64 begin_ns;             /* CLOCK_BOOTTIME of the signal (or user space's request) that began the watch */
	__u64 count[NET_KINDS];     /* the clients' connections: a probe's are in probes */
	__u64 probes[NET_KINDS];    /* the connections a prober (the kubelet's probes: user space names its processes) made, by the same kinds */
	__u64 first_ns[NET_KINDS];  /* 0: none yet */
	__u64 last_ns[NET_KINDS];
	/* When a client's data last arrived on an inbound connection (the
	 * latest of the connections that ended, a probe's never): the last
	 * request, new connection or pooled; 0 when none did or user space
	 * gave no tick (ns_per_jiffy). */
	__u64 last_data_ns;
	/* Which namespace of that inode: its struct net's hash_mix, random
	 * per namespace; 0 until the first event adopts it (a watch user space
	 * began). Inodes are recycled at once (the lowest free number), so an
	 * entry left by a dead namespace must never count for its successor. */
	__u32 net_gen;
	__u32 _pad;
};

/* The same counts split by the cgroup v2 of the process that made each
 * socket (an accepted connection inherits its listener's): the containers
 * of a pod share a network namespace, not a cgroup. Key and value of the
 * stopping_conns map. A refused attempt has no socket: never here. */
struct net_cg_key {
	__u32 netns;
	__u32 _pad;
	__u64 cgroup_id;
	__u64 begin_ns; /* the watch's (net_stats.begin_ns): an entry left from an earlier watch never counts for a later one */
};

struct net_cg_counts {
	__u64 count[NET_KINDS];
};

/* Who lost requests: a stopping namespace's lost and possibly lost
 * connections (refused, reset_sent, cut, unanswered, after_close,
 * undecided) by the client's address. Key and value of the stopping_peers
 * map, an LRU: user space says when the peers kept hold fewer than the
 * namespace's count. A probe's never. */
struct peer_key {
	__u32 netns;
	__u16 family;
	__u16 _pad;
	__u8 addr[16];  /* IPv4: the first 4 bytes; an IPv4 client of a dual-stack socket as IPv4 */
	__u64 begin_ns; /* the watch's */
};

struct peer_counts {
	__u64 count[NET_KINDS]; /* the kinds above only */
};

/* An inbound connection of a watched namespace that its container's side
 * closed (key and value of the closed_conns map): the socket that answers
 * a later request is another object (a timewait socket) or the same one
 * orphaned, so the connection is known again by its addresses. */
struct conn_key {
	__u32 netns;
	__u16 family;
	__u16 lport;   /* host order */
	__u16 rport;   /* network order, as the socket keeps it */
	__u16 _pad;
	__u8 laddr[16]; /* IPv4: the first 4 bytes */
	__u8 raddr[16];
};

struct conn_closed {
	__u64 cgroup_id; /* the socket's, as counted */
	__u64 begin_ns;  /* the watch's: a later watch's request is not this one's */
	__u32 kind;      /* the kind its close was counted as */
	__u32 late;      /* a request after the close was counted */
};

struct proc {
	__u32 pid;          /* host tgid */
	__u32 tid;          /* host tid */
	__u32 ns_pid;       /* tgid inside the task's own (active) pid namespace */
	__u32 pidns;        /* inode of that pid namespace */
	__u64 cgroup_id;    /* cgroup v2 id (inode of the cgroup2 directory), <=1: none */
	__u64 cgroup_v1_id; /* cgroup v1 memory controller directory inode, 0: none */
	char comm[TASK_COMM_LEN];
};

struct ancestor {
	__u32 pid;
	__u32 _pad;
	char comm[TASK_COMM_LEN]; /* 8-aligned: copied as two 8-byte words */
};

/*
 * A blocked record (EV_BLOCKED) reuses struct event: ts_ns is the SIGKILL's
 * own record's; target the task; sender.pid the killed process's tgid;
 * result its role (enum blocked_role); group its state (enum task_run);
 * si_code the system call it is in (-1: none, -2: not read; x86_64 numbers); exit_code
 * that call's first argument; netns the kind of that argument's file when
 * it is an fd (i_mode >> 12: 1 pipe, 8 file, 12 socket, 2 char device; 0
 * unknown); handler a child's disposition of SIGTERM and sig_flags its
 * dispositions of SIGHUP, SIGINT, SIGQUIT and SIGTERM, two bits each (0
 * default, 1 ignored, 2 handler), for a child that may ignore the stop
 * signal; ancestors_len the process's thread count (up to 255).
 */
enum blocked_role {
	BLOCKED_MAIN = 0,   /* the killed process's main thread */
	BLOCKED_THREAD = 1, /* another of its threads */
	BLOCKED_CHILD = 2,  /* one of its children */
	/* A process that entered the init's namespace from outside (runc
	 * exec: a preStop exec hook, an exec probe, kubectl exec) and still
	 * runs, one of the last EXEC_SLOTS such; ancestors_len is its slot. */
	BLOCKED_EXEC = 3,
	BLOCKED_EXEC_CHILD = 4, /* a child of that process; ancestors_len its parent's slot */
};

/* The last EXEC_SLOTS processes that entered a pid namespace from outside,
 * by the namespace's inode (the ns_execs map): the task's address, checked
 * against its tgid and start time before any read, as the task may be gone. */
#define EXEC_SLOTS 4
struct exec_slots {
	__u64 task[EXEC_SLOTS];
	__u64 start_time[EXEC_SLOTS];
	__u32 tgid[EXEC_SLOTS];
	__u32 next;
	__u32 _pad;
};

enum task_run {
	TASK_RUN_RUNNING = 0, /* running or runnable: making progress */
	TASK_RUN_SLEEPING = 1, /* asleep, interruptible (S) */
	TASK_RUN_DISK = 2,     /* asleep, uninterruptible (D) */
	TASK_RUN_STOPPED = 3,  /* stopped or traced */
	TASK_RUN_OTHER = 4,
};

struct event {
	__u64 ts_ns;        /* CLOCK_BOOTTIME */
	__u8 type;          /* enum event_type */
	__u8 result;        /* signal_generate result: 0 delivered .. 4 lose_info */
	__u8 group;         /* 1: process-directed send */
	__u8 handler;       /* 0 SIG_DFL, 1 SIG_IGN, 2 user handler */
	__s32 signo;
	__s32 si_code;      /* SI_USER for NOINFO, SI_KERNEL for PRIV */
	__u32 facts;        /* enum fact */
	__u32 sig_flags;    /* target->signal->flags at the event */
	__s32 exit_code;    /* exit: task->exit_code (wait status layout) */
	__u8 ancestors_len;
	__u8 _pad[3];
	__u32 netns;        /* generate: inode of the target's network namespace, 0 when unknown */
	struct proc sender; /* generate: current; exec: the parent, outside the namespace; ns_empty: the init's parent; zero for deliver, exit, oom */
	struct proc target; /* generate: the target; deliver: current; exit: the process; oom: the victim; ns_empty: the init */
	struct ancestor ancestors[MAX_ANCESTORS]; /* sender's parents, nearest first (generate, exec) */
};

/* Per-CPU, monotonic, never reset: seen == emitted + dropped for each type. */
struct counters {
	__u64 seen[EV_TYPES];
	__u64 emitted[EV_TYPES];
	__u64 dropped[EV_TYPES];
};

#endif /* __SIGSCOPE_H__ */
