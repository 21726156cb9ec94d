package tracer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel's tick (1 s / CONFIG_HZ) turns a socket's jiffy times into
// boot time in the kernel (bpf/sigscope.bpf.c, client_data): when a
// client's data last arrived on a connection is kept by the kernel only in
// jiffies (icsk_ack.lrcvtime). BPF has no way to read CONFIG_HZ on a
// kernel without its config file (Debian's is in /boot, not in the
// kernel), so user space finds it once and gives it as a constant.

// knownHZ are the values CONFIG_HZ takes (kernel/Kconfig.hz, and the
// architectures' own): a measured rate is taken only near one of them.
var knownHZ = []float64{100, 250, 300, 1000, 24, 48, 128, 200, 256, 1024}

var tick struct {
	once sync.Once
	d    time.Duration
	err  error
}

// kernelTick is the running kernel's tick, found once: from its config
// (/proc/config.gz, /boot/config-RELEASE), else measured from the jiffies
// and the monotonic clock that /proc/timer_list shows.
func kernelTick() (time.Duration, error) {
	tick.once.Do(func() {
		tick.d, tick.err = findTick()
	})
	return tick.d, tick.err
}

func findTick() (time.Duration, error) {
	var uts unix.Utsname
	release := ""
	if unix.Uname(&uts) == nil {
		release = unix.ByteSliceToString(uts.Release[:])
	}
	var errs []string
	for _, path := range []string{"/proc/config.gz", "/boot/config-" + release} {
		hz, err := configHZ(path)
		if err == nil {
			return time.Second / time.Duration(hz), nil
		}
		errs = append(errs, err.Error())
	}
	hz, err := timerListHZ(readTimerList)
	if err != nil {
		errs = append(errs, err.Error())
		return 0, fmt.Errorf("the kernel's tick (CONFIG_HZ) is not known: %s", strings.Join(errs, "; "))
	}
	return time.Second / time.Duration(hz), nil
}

// configHZ reads CONFIG_HZ from a kernel config file, gzipped or not.
func configHZ(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	return parseConfigHZ(r, path)
}

func parseConfigHZ(r io.Reader, name string) (int, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		v, ok := bytes.CutPrefix(sc.Bytes(), []byte("CONFIG_HZ="))
		if !ok {
			continue
		}
		hz, err := strconv.Atoi(string(v))
		if err != nil || hz <= 0 {
			return 0, fmt.Errorf("%s: CONFIG_HZ=%q is no rate", name, v)
		}
		return hz, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return 0, fmt.Errorf("%s has no CONFIG_HZ", name)
}

// readTimerList reads /proc/timer_list's first "now at N nsecs" (the
// monotonic clock, in seconds) and first "jiffies: J".
func readTimerList() (now, jiffies float64, err error) {
	f, err := os.Open("/proc/timer_list")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var haveNow, haveJiffies bool
	sc := bufio.NewScanner(f)
	for sc.Scan() && !(haveNow && haveJiffies) {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "now at "); ok && !haveNow {
			ns, err := strconv.ParseFloat(strings.TrimSuffix(v, " nsecs"), 64)
			if err != nil {
				return 0, 0, fmt.Errorf("/proc/timer_list: %q: %w", line, err)
			}
			now, haveNow = ns/1e9, true
		}
		if v, ok := strings.CutPrefix(line, "jiffies: "); ok && !haveJiffies {
			if jiffies, err = strconv.ParseFloat(v, 64); err != nil {
				return 0, 0, fmt.Errorf("/proc/timer_list: %q: %w", line, err)
			}
			haveJiffies = true
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("/proc/timer_list: %w", err)
	}
	if !haveNow || !haveJiffies {
		return 0, 0, fmt.Errorf("/proc/timer_list shows no clock and jiffies")
	}
	return now, jiffies, nil
}

// timerListHZ measures CONFIG_HZ from the monotonic clock and the jiffies
// (read). The kernel starts jiffies at INITIAL_JIFFIES, 2^32 - 300 s x HZ,
// so that it wraps 32 bits five minutes after boot: J - 2^32 = HZ x (now -
// 300 s), and one reading is enough away from that instant (both count
// from boot and stop in a suspend alike). Near it, two readings 200 ms
// apart: the jiffies that passed, at +-1.
func timerListHZ(read func() (now, jiffies float64, err error)) (int, error) {
	now, jiffies, err := read()
	if err != nil {
		return 0, err
	}
	hz, tolerance := 0.0, 0.01
	if since := now - 300; math.Abs(since) >= 10 {
		hz = (jiffies - math.Exp2(32)) / since
	} else {
		time.Sleep(200 * time.Millisecond)
		now2, jiffies2, err := read()
		if err != nil {
			return 0, err
		}
		if now2 <= now {
			return 0, fmt.Errorf("/proc/timer_list: the clock did not advance")
		}
		hz, tolerance = (jiffies2-jiffies)/(now2-now), 0.04
	}
	for _, k := range knownHZ {
		if math.Abs(hz-k) <= k*tolerance {
			return int(k), nil
		}
	}
	return 0, fmt.Errorf("/proc/timer_list: a rate of %.1f jiffies per second is no CONFIG_HZ", hz)
}

// CrossWindow is how soon after the container's last answer a client's
// data is taken to have crossed it rather than followed it (a request's
// body sent behind its headers, a pipelined request, a client reusing the
// connection at once): who spoke last is then undecided
// (bpf/sigscope.bpf.c, crossed). A client that read the answer and sent a
// new request after an idle spell, the keep-alive race, comes later.
const CrossWindow = 5 * time.Millisecond

// crossJiffies is CrossWindow in ticks of tickNS ns, at least 1; 0 when
// the tick is not known.
func crossJiffies(tickNS uint64) uint32 {
	if tickNS == 0 {
		return 0
	}
	return uint32(max(1, (uint64(CrossWindow.Nanoseconds())+tickNS-1)/tickNS))
}
