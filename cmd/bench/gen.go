package main

// The floor programs are committed as generated, like the tracer's (see
// tracer/gen.go): `make generate` reruns this and CI fails on a diff.
//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel floor bpf/floor.bpf.c -- -I../../bpf/headers
