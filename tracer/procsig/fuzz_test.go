package procsig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// procStatusSh is a real /proc/PID/status of busybox sh with a TERM trap,
// a blocked mask added.
const procStatusSh = "Name:\tsh\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t42\nNgid:\t0\nPid:\t42\nPPid:\t0\n" +
	"NStgid:\t42\t1\nNSpid:\t42\t1\nNSpgid:\t42\t1\nNSsid:\t42\t1\nThreads:\t1\nSigQ:\t0/96343\n" +
	"SigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\nSigBlk:\t0000000000004000\n" +
	"SigIgn:\t0000000000000004\nSigCgt:\t0000000000014002\nCapInh:\t0000000000000000\n"

// ReadProcSignals and SignalfdMask on any status, cmdline and signalfd
// fdinfo, written as a fake /proc: an error or a result, never a panic. A
// result's command line is the file's NUL-separated fields, and the
// signalfd mask is only ever read from signalfd entries.
func FuzzReadProcSignals(f *testing.F) {
	f.Add([]byte(procStatusSh), []byte("sh\x00-c\x00trap 'exit 0' TERM; sleep 1000 & wait\x00"),
		[]byte("pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nsigmask:\t0000000000004002\n"))
	f.Add([]byte("Name:\tcatatonit\nNSpid:\t30038\nSigBlk:\tfffffffffffffeff\nSigIgn:\t0\nSigCgt:\t0\n"),
		[]byte("/catatonit\x00--\x00sleep\x00infinity"), []byte("sigmask:\tfffffffe7ffbfeff\n"))
	f.Add([]byte("Name:\tzombie\nNSpid:\n"), []byte{}, []byte("sigmask: zz\n"))
	f.Add([]byte("SigBlk:\t10000000000000000\nSigIgn:\t0\nSigCgt:\t0\n"), []byte("\x00\x00"), []byte{})
	f.Add([]byte("Name:\t\xff\x1b[31m\nNSpid:\t1\t-1\nSigBlk:\t0\nSigIgn:\t0\nSigCgt:\t0"), []byte("a\x00\x00b\x00"), []byte("sigmask:\n"))

	// One fake /proc for the run: a worker calls the function once at a
	// time, and each call writes every file it reads.
	root := f.TempDir()
	dir := filepath.Join(root, "42")
	for _, d := range []string{filepath.Join(dir, "fd"), filepath.Join(dir, "fdinfo")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	// fd 3 is a signalfd; fd 4 is a pipe, whose fdinfo has the same text.
	if err := os.Symlink(signalfdLink, filepath.Join(dir, "fd", "3")); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink("pipe:[1057]", filepath.Join(dir, "fd", "4")); err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, status, cmdline, fdinfo []byte) {
		for name, b := range map[string][]byte{"status": status, "cmdline": cmdline, "fdinfo/3": fdinfo, "fdinfo/4": fdinfo} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}

		p, err := ReadProcSignals(root, 42)
		if err == nil {
			args := strings.TrimRight(string(cmdline), "\x00")
			if strings.Join(p.Cmdline, "\x00") != args || (args == "") != (p.Cmdline == nil) {
				t.Fatalf("cmdline %q read as %q", cmdline, p.Cmdline)
			}
			for sig := sigvocab.Signal(1); sig <= sigvocab.MaxSignal; sig++ {
				st := p.State(sig)
				if st.Blocked != p.Blocked.Has(sig) || st.NSInit != (p.NSPID == 1) || st.Waited || st.Exiting {
					t.Fatalf("%s: state %+v of %+v", sig, st, p)
				}
			}
			caught, ignored, blocked, cl, err := PID1Signals(root, 42)
			if err != nil || caught != p.Caught || ignored != p.Ignored || blocked != p.Blocked || strings.Join(cl, "\x00") != args {
				t.Fatalf("PID1Signals disagrees with ReadProcSignals: %v", err)
			}
		}

		mask, err := SignalfdMask(root, 42)
		hasMask := false
		for _, line := range strings.Split(string(fdinfo), "\n") {
			hasMask = hasMask || strings.HasPrefix(line, "sigmask:")
		}
		if err == nil && !hasMask && mask != 0 {
			t.Fatalf("no sigmask line, mask %s", mask)
		}
		if err != nil && !hasMask {
			t.Fatalf("no sigmask line, error %v", err)
		}
	})
}
