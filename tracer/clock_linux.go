package tracer

import (
	"time"

	"golang.org/x/sys/unix"
)

// NewClock samples the offset between the wall clock and CLOCK_BOOTTIME.
func NewClock() Clock {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return Clock{offset: time.Now().UnixNano() - ts.Nano()}
}
