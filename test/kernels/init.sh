#!/bin/sh
# /init of the test VM: mount what the tracer and its tests need, run the
# privileged test binary, report on the serial console, power off.
export PATH=/bin:/sbin:/usr/bin
export SIGSCOPE_REQUIRE_PRIVILEGED=1 TMPDIR=/tmp HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev   # without /dev, exec of subprocesses fails
mount -t tmpfs tmpfs /tmp
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# cgroup v2 only (as on most Kubernetes nodes), memory controller on for the
# OOM test; the host runs the v1/v2 hybrid, so both layouts get tested.
mount -t cgroup2 cgroup2 /sys/fs/cgroup && echo +memory >/sys/fs/cgroup/cgroup.subtree_control
echo "SIGSCOPE_KERNEL $(uname -r)"
if [ -e /sys/kernel/btf/vmlinux ]; then echo "SIGSCOPE_BTF yes"; else echo "SIGSCOPE_BTF no"; fi
cd /tracer
./tracer.test -test.v -test.count=1 -test.timeout=10m -test.run "$(cat /test-run)"
echo "SIGSCOPE_RC $?"
sync
reboot -f
