package sigvocab

import "strconv"

// x86_64's system calls a process waits in, by number: what a blocked
// record (KindBlocked) can name. Others are "syscall N". The kernel reads
// the number from the registers saved at the top of the task's stack, so
// the numbers are the architecture's: sigscope reads them on x86_64 only.
var syscallNames = map[int32]string{
	0: "read", 1: "write", 7: "poll", 17: "pread64", 19: "readv", 23: "select", 34: "pause",
	35: "nanosleep", 43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg",
	61: "wait4", 128: "rt_sigtimedwait", 130: "rt_sigsuspend", 202: "futex", 230: "clock_nanosleep",
	232: "epoll_wait", 247: "waitid", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 288: "accept4",
	435: "clone3", 441: "epoll_pwait2", 449: "futex_waitv", 42: "connect", 72: "fcntl", 74: "fsync",
	75: "fdatasync", 76: "truncate", 3: "close", 62: "kill", 56: "clone", 57: "fork", 59: "execve",
	60: "exit", 231: "exit_group", 24: "sched_yield", 39: "getpid", 13: "rt_sigaction", 14: "rt_sigprocmask",
	15: "rt_sigreturn", 16: "ioctl", 257: "openat", 2: "open", 4: "stat", 5: "fstat", 8: "lseek",
	9: "mmap", 11: "munmap", 12: "brk", 20: "writev", 18: "pwrite64", 22: "pipe", 293: "pipe2",
	32: "dup", 33: "dup2", 292: "dup3", 40: "sendfile", 41: "socket", 49: "bind", 50: "listen",
	48: "shutdown", 55: "getsockopt", 54: "setsockopt", 63: "uname", 79: "getcwd", 87: "unlink",
	263: "unlinkat", 82: "rename", 83: "mkdir", 84: "rmdir", 233: "epoll_ctl", 291: "epoll_create1",
	290: "eventfd2", 284: "eventfd", 283: "timerfd_create", 286: "timerfd_settime", 289: "signalfd4",
	282: "signalfd", 186: "gettid", 200: "tkill", 234: "tgkill", 424: "pidfd_send_signal",
	434: "pidfd_open", 228: "clock_gettime", 96: "gettimeofday", 318: "getrandom", 302: "prlimit64",
	299: "recvmmsg", 307: "sendmmsg", 425: "io_uring_setup", 426: "io_uring_enter",
}

// SyscallName names an x86_64 system call: "wait4", "syscall 333"; "" for
// -1 (no system call), -2 (not read) and other negative numbers.
func SyscallName(nr int32) string {
	if nr < 0 {
		return ""
	}
	if n, ok := syscallNames[nr]; ok {
		return n
	}
	return "syscall " + strconv.Itoa(int(nr))
}
