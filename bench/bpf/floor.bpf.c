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
 *
 * Neither reads the tracepoint's arguments. The bench attaches one at a time.
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
