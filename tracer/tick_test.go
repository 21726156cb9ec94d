package tracer

import (
	"math"
	"strings"
	"testing"
)

// CONFIG_HZ from a kernel config, and measured where there is none
// (Debian's kernels keep theirs in /boot, which a container or the
// kernel matrix's initramfs lacks).
func TestKernelTickSources(t *testing.T) {
	hz, err := parseConfigHZ(strings.NewReader("# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n"), "config")
	if err != nil || hz != 250 {
		t.Errorf("config: %d, %v", hz, err)
	}
	if _, err := parseConfigHZ(strings.NewReader("CONFIG_NO_HZ=y\n"), "config"); err == nil {
		t.Errorf("a config without CONFIG_HZ gave a rate")
	}
	// This machine's /proc/timer_list at 27947.8 s after boot: HZ=250
	// from one reading (jiffies began 300 s x HZ below 2^32).
	one := func(now, j float64) func() (float64, float64, error) {
		return func() (float64, float64, error) { return now, j, nil }
	}
	if hz, err := timerListHZ(one(27947.797, 4301879207)); err != nil || hz != 250 {
		t.Errorf("after the wrap: %d, %v", hz, err)
	}
	// 60 s after boot at HZ=1000: below 2^32 still.
	if hz, err := timerListHZ(one(60, math.Exp2(32)-240*1000)); err != nil || hz != 1000 {
		t.Errorf("before the wrap: %d, %v", hz, err)
	}
	// Near the wrap: two readings, 200 ms of 300 jiffies a second.
	reads := [][2]float64{{301, 1e9}, {301.2, 1e9 + 60}}
	i := 0
	two := func() (float64, float64, error) {
		r := reads[min(i, 1)]
		i++
		return r[0], r[1], nil
	}
	if hz, err := timerListHZ(two); err != nil || hz != 300 || i != 2 {
		t.Errorf("near the wrap: %d, %v after %d readings", hz, err, i)
	}
	// A rate no kernel has is no tick.
	if hz, err := timerListHZ(one(1000, math.Exp2(32)+700*400)); err == nil {
		t.Errorf("a rate of 400 taken as %d", hz)
	}
	// This kernel's, from whichever source it has.
	if d, err := kernelTick(); err != nil || d <= 0 {
		t.Errorf("this kernel's tick: %v, %v", d, err)
	}
}
