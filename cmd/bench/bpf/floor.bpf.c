// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * floor: what any BPF tracer of signal_generate costs the kill(2) it runs
 * in, measured by `make bench` beside sigscope in the same run.
 *
 *   noop   returns at once: the tracepoint's dispatch, the trampoline and the
 *          program's entry and exit. No program on signal_generate can cost
 *          less, so a signal sigscope filters out is judged against it.
 *   empty  reserves an 8-byte record on a ring buffer and submits it without
 *          a wakeup: the cheapest way to hand each signal to user space. A
 *          signal sigscope emits is judged against it.
 *   stamped  the least a tracer that says when and who must do: a record of
 *          sigscope's size stamped with the time (bpf_ktime_get_boot_ns) and
 *          the sender's and target's ids (bpf_get_current_task_btf and the
 *          tracepoint's task). It shows what of sigscope's cost above
 *          `empty` is the clock and the current task, two helper calls that
 *          no program can avoid and whose price the host sets (a kernel
 *          return slowed by a mitigation such as SRSO).
 *
 * The bench attaches one at a time; the noop_tcp_* programs, the connection
 * floor, all three at once.
 */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized from Go, to sigscope's ring size */
} records SEC(".maps");

/* Reserves that failed because the reader fell behind: the bench reports
 * them, since a full ring costs less than a record and would flatter the
 * floor. Written only on failure. */
__u64 dropped = 0;

/* sigscope's record size (tracer.RecordSize; a bench test keeps them equal). */
#define SIGSCOPE_RECORD_SIZE 232

struct stamped {
	__u64 ts_ns;
	__u32 sender_tgid;
	__u32 target_tgid;
	__u8 rest[SIGSCOPE_RECORD_SIZE - 16];
};

/* For the bench's test that SIGSCOPE_RECORD_SIZE follows the tracer. */
const volatile __u32 stamped_size = sizeof(struct stamped);

SEC("tp_btf/signal_generate")
int BPF_PROG(noop)
{
	return 0;
}

SEC("tp_btf/signal_generate")
int BPF_PROG(empty)
{
	__u64 *r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);

	if (!r) {
		__sync_fetch_and_add(&dropped, 1);
		return 0;
	}
	*r = 0;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("tp_btf/signal_generate")
int BPF_PROG(stamped, int sig, struct kernel_siginfo *info, struct task_struct *task)
{
	struct stamped *r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);

	if (!r) {
		__sync_fetch_and_add(&dropped, 1);
		return 0;
	}
	r->ts_ns = bpf_ktime_get_boot_ns();
	r->sender_tgid = bpf_get_current_task_btf()->tgid;
	r->target_tgid = task->tgid;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

/* The connection floor: what any BPF tracer of TCP state changes costs a
 * connection, on the three tracepoints sigscope's connection count uses
 * (conns.go). They return at once. */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(noop_tcp_state)
{
	return 0;
}

SEC("tp_btf/tcp_receive_reset")
int BPF_PROG(noop_tcp_rst_received)
{
	return 0;
}

SEC("tp_btf/tcp_send_reset")
int BPF_PROG(noop_tcp_rst_sent)
{
	return 0;
}

/* The filtering floor: what any tracer that counts the connections of
 * chosen network namespaces must do on each TCP event, and no more: read
 * the namespace (the socket's; for a RST sent with no socket, the incoming
 * device's) and look it up once in a hash map, here always empty. sigscope's
 * programs outside a stop are judged against these (conns.go). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} floor_nets SEC(".maps");

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(lookup_tcp_state, const struct sock *sk)
{
	__u32 netns = sk->__sk_common.skc_net.net->ns.inum;

	return bpf_map_lookup_elem(&floor_nets, &netns) ? 1 : 0;
}

SEC("tp_btf/tcp_receive_reset")
int BPF_PROG(lookup_tcp_rst_received, struct sock *sk)
{
	__u32 netns = sk->__sk_common.skc_net.net->ns.inum;

	return bpf_map_lookup_elem(&floor_nets, &netns) ? 1 : 0;
}

SEC("tp_btf/tcp_send_reset")
int BPF_PROG(lookup_tcp_rst_sent, const struct sock *sk, const struct sk_buff *skb)
{
	__u32 netns;

	if (sk || !skb)
		return 0;
	netns = skb->dev->nd_net.net->ns.inum;
	return bpf_map_lookup_elem(&floor_nets, &netns) ? 1 : 0;
}
