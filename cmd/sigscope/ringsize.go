package main

import (
	"fmt"
	"math/bits"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sigscope/sigscope/tracer"
)

// maxRingSize bounds --ring-size: the kernel takes up to 2 GiB minus a
// page, and a ring past 1 GiB is memory no burst on one node needs.
const maxRingSize = 1 << 30

// ringSize is --ring-size, the same on every command that traces (trace,
// timeline, serve): the kernel ring buffer's size in bytes. It is checked
// when parsed, so that a size the kernel would refuse is a usage error
// named after the flag, before anything is loaded.
type ringSize struct{ n *int }

// registerRingSize adds --ring-size to fl, writing the size to n.
func registerRingSize(fl *pflag.FlagSet, n *int) {
	*n = tracer.DefaultRingSize
	fl.Var(ringSize{n}, "ring-size",
		"kernel ring buffer size: a power of two from the page size ("+strconv.Itoa(os.Getpagesize())+") to 1G, in bytes or with K, M, G; "+
			"what a burst overflows is dropped and counted (docs/events.md)")
}

func (r ringSize) String() string {
	if r.n == nil {
		return ""
	}
	return formatSize(*r.n)
}

func (r ringSize) Type() string { return "bytes" }

func (r ringSize) Set(s string) error {
	n, err := parseRingSize(s, os.Getpagesize())
	if err != nil {
		return err
	}
	*r.n = n
	return nil
}

// parseRingSize reads "65536", "64K", "8M" or "1G" (binary multiples) and
// checks what the kernel checks for a BPF ring buffer: a power of two and a
// multiple of the page size.
func parseRingSize(s string, page int) (int, error) {
	v, err := parseBytes(s, maxRingSize)
	if err != nil {
		return 0, err
	}
	n := int(v)
	if n < page || bits.OnesCount(uint(n)) != 1 {
		return 0, fmt.Errorf("want a power of two of at least the page size (%d bytes)", page)
	}
	return n, nil
}

// parseBytes reads a size in bytes, "65536", or with a binary multiple,
// "64K", "8M", "1G", of at most limit bytes (limit written as formatSize
// writes it in the error).
func parseBytes(s string, limit uint64) (uint64, error) {
	num, mult := strings.TrimSpace(s), uint64(1)
	if num != "" {
		switch num[len(num)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
	}
	if mult > 1 {
		num = num[:len(num)-1]
	}
	v, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want a size in bytes such as 65536, 64K or 8M")
	}
	if v > limit/mult {
		return 0, fmt.Errorf("at most %s", formatSize(int(limit)))
	}
	return v * mult, nil
}

// formatSize writes a size the way --ring-size reads it, as short as
// exact: 8M, 64K, 4096.
func formatSize(n int) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"G", 30}, {"M", 20}, {"K", 10}} {
		if n > 0 && n%(1<<u.shift) == 0 {
			return strconv.Itoa(n>>u.shift) + u.suffix
		}
	}
	return strconv.Itoa(n)
}

// ringSizeGiven reports whether n is a size other than the default (0 is
// the default too), for commands where --ring-size makes no sense.
func ringSizeGiven(n int) bool { return n != 0 && n != tracer.DefaultRingSize }
