package tracer

// The generated object and Go bindings are committed so that `go build` needs
// no clang. `make generate` reruns this; CI fails when the output changes.
// clang-14 and llvm-strip-14 are pinned so that the object is byte-for-byte
// reproducible on the Debian machines CI runs on.
//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel -type event -type counters -type proc -type ancestor -type event_type -type fact -type target_key -type net_stats -type net_kind -type blocked_role sigscope ../bpf/sigscope.bpf.c -- -I../bpf/headers -I../bpf
// The same programs for kernels without bpf_get_current_task_btf() (before
// 5.11): the current task is read with CO-RE helper reads. Types come from
// the object above (same source, same layout).
//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -cflags "-O2 -g -Wall -Werror -mcpu=v3 -DSIGSCOPE_COMPAT" -target bpfel sigscopeCompat ../bpf/sigscope.bpf.c -- -I../bpf/headers -I../bpf
// The task iterator behind `sigscope audit` is a separate object: it is
// loaded only by the audit, and the tracer's object stays as it is.
//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel -type task_state taskstate ../bpf/taskstate.bpf.c -- -I../bpf/headers -I../bpf
