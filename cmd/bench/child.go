package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The environment that turns a re-executed bench binary into the sender.
const (
	roleEnv     = "SIGSCOPE_BENCH_ROLE" // "sender"
	targetEnv   = "SIGSCOPE_BENCH_TARGET_PID"
	durationEnv = "SIGSCOPE_BENCH_DURATION"
	cpuEnv      = "SIGSCOPE_BENCH_CPU" // optional: pin the sender to this CPU
)

// childMain runs the role named by roleEnv and returns the exit status.
func childMain(role string) int {
	var err error
	switch role {
	case "sender":
		err = senderMain()
	case "conns", "conns-flood":
		err = connsChildMain(role == "conns-flood")
	default:
		err = fmt.Errorf("unknown %s %q", roleEnv, role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench sender:", err)
		return 1
	}
	return 0
}

// senderMain sends SIGUSR1 to the target in a tight loop on one OS thread
// until the duration has passed, then prints "<sent> <elapsed ns> <cpu ns>",
// the last being the thread's own user+sys time over the loop.
func senderMain() error {
	runtime.LockOSThread()
	pid, err := strconv.Atoi(os.Getenv(targetEnv))
	if err != nil || pid <= 0 {
		return fmt.Errorf("bad %s %q", targetEnv, os.Getenv(targetEnv))
	}
	d, err := time.ParseDuration(os.Getenv(durationEnv))
	if err != nil || d <= 0 {
		return fmt.Errorf("bad %s %q", durationEnv, os.Getenv(durationEnv))
	}
	if v := os.Getenv(cpuEnv); v != "" {
		cpu, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("bad %s %q", cpuEnv, v)
		}
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("pinning to CPU %d: %w", cpu, err)
		}
	}

	// RawSyscall skips the scheduler hooks of Syscall: kill(2) on a target
	// that ignores the signal never blocks, and what is left to measure is
	// the kernel path. The clock is read once per batch.
	const batch = 256
	var sent uint64
	cpu0, err := threadCPU()
	if err != nil {
		return err
	}
	start := time.Now()
	deadline := start.Add(d)
	for {
		for range batch {
			if _, _, e := unix.RawSyscall(unix.SYS_KILL, uintptr(pid), uintptr(unix.SIGUSR1), 0); e != 0 {
				return fmt.Errorf("kill(%d, SIGUSR1) after %d sends: %w", pid, sent, e)
			}
		}
		sent += batch
		if now := time.Now(); !now.Before(deadline) {
			cpu1, err := threadCPU()
			if err != nil {
				return err
			}
			fmt.Printf("%d %d %d\n", sent, now.Sub(start).Nanoseconds(), (cpu1 - cpu0).Nanoseconds())
			return nil
		}
	}
}

// threadCPU is the calling thread's user+sys time.
func threadCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// storm is what one sender reported.
type storm struct {
	sent    uint64
	elapsed time.Duration // wall clock
	cpu     time.Duration // the sending thread's user+sys time
}

// rate is signals per wall-clock second: what the targets are about.
func (s storm) rate() float64 { return float64(s.sent) / s.elapsed.Seconds() }

// busy is the fraction of the phase the sender was on a CPU: well below 1,
// other work on the machine took the sender's CPU and the phase is noise.
func (s storm) busy() float64 { return s.cpu.Seconds() / s.elapsed.Seconds() }

// runSender re-executes this binary as the sender and waits for its report.
// The child dies with the bench (Pdeathsig) and with ctx.
func runSender(ctx context.Context, target int, d time.Duration, pinCPU int) (storm, error) {
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Env = append(os.Environ(),
		roleEnv+"=sender",
		targetEnv+"="+strconv.Itoa(target),
		durationEnv+"="+d.String(),
		// One P, and no preemption signals (SIGURG) sent to itself every 10 ms.
		"GOMAXPROCS=1",
		"GODEBUG=asyncpreemptoff=1",
	)
	if pinCPU >= 0 {
		cmd.Env = append(cmd.Env, cpuEnv+"="+strconv.Itoa(pinCPU))
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return storm{}, fmt.Errorf("sender: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var s storm
	var ns, cpu int64
	if _, err := fmt.Sscan(stdout.String(), &s.sent, &ns, &cpu); err != nil {
		return storm{}, fmt.Errorf("sender printed %q: %w", stdout.String(), err)
	}
	s.elapsed, s.cpu = time.Duration(ns), time.Duration(cpu)
	if s.sent == 0 || s.elapsed <= 0 || s.cpu <= 0 {
		return storm{}, fmt.Errorf("sender printed %q", stdout.String())
	}
	return s, nil
}

// target is a process that ignores SIGUSR1: `sh -c 'trap "" USR1; exec sleep'`.
// SIG_IGN survives exec, and a sleeping single-threaded process with nothing
// blocked makes every kill return at prepare_signal with result IGNORED.
type target struct {
	cmd *exec.Cmd
}

func startTarget() (*target, error) {
	cmd := exec.Command("/bin/sh", "-c", `trap "" USR1; exec sleep 86400`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the target: %w", err)
	}
	t := &target{cmd: cmd}
	if err := t.waitReady(2 * time.Second); err != nil {
		t.stop()
		return nil, err
	}
	return t, nil
}

func (t *target) pid() int { return t.cmd.Process.Pid }

// waitReady waits until the shell has exec'd sleep with SIGUSR1 ignored.
func (t *target) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		comm, ign, err := procSigIgn(t.pid())
		if err == nil && comm == "sleep" && ign&(1<<(unix.SIGUSR1-1)) != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("target %d not ready after %v (comm %q, SigIgn %#x, %v)", t.pid(), timeout, comm, ign, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (t *target) stop() {
	_ = t.cmd.Process.Kill()
	_ = t.cmd.Wait()
}

// procSigIgn returns a process's name and ignored-signal mask.
func procSigIgn(pid int) (string, uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	var comm string
	var ign uint64
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		v = strings.TrimSpace(v)
		switch k {
		case "Name":
			comm = v
		case "SigIgn":
			if ign, err = strconv.ParseUint(v, 16, 64); err != nil {
				return comm, 0, err
			}
			found = true
		}
	}
	if !found {
		return comm, 0, errors.New("no SigIgn line")
	}
	return comm, ign, sc.Err()
}
