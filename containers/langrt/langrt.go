package langrt

import (
	"debug/elf"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Runtime names a language runtime (or a kind of program) as sigscope's
// JSON writes it: "nodejs", "go", "jvm", "cpython", "ruby", "perl",
// "shell", "init". The zero value is an unknown runtime.
type Runtime string

// The runtimes recognised.
const (
	Unknown Runtime = ""
	NodeJS  Runtime = "nodejs"
	Go      Runtime = "go"
	JVM     Runtime = "jvm"
	CPython Runtime = "cpython"
	Ruby    Runtime = "ruby"
	Perl    Runtime = "perl"
	Shell   Runtime = "shell"
	// Init is a known init made to run as PID 1 and pass the stop signal
	// on to its child: tini (docker run --init), dumb-init, catatonit,
	// s6-svscan.
	Init Runtime = "init"
)

// Known reports whether r is one of the runtimes above (a value read back
// from JSON may be anything).
func Known(r Runtime) bool {
	_, ok := facts[r]
	return ok && r != Unknown
}

// Name is how texts call it: "Node.js", "the Go runtime".
func (r Runtime) Name() string {
	if f, ok := facts[r]; ok {
		return f.name
	}
	return string(r)
}

// FixExecForm is the fix for a shell (or any program that does not act on
// the stop signal) as PID 1: the timeline's hints and the audit's
// predictions both say it.
const FixExecForm = "Use the exec form of ENTRYPOINT/CMD, `exec` the app in the entrypoint script, or run an init such as tini"

// fact is what a runtime does with SIGTERM as a namespace init, and the fix
// a hint names.
type fact struct {
	name string
	// reraises: its default SIGTERM/SIGINT handler restores the default
	// action and sends the signal to itself, which the kernel drops for a
	// namespace init (Node.js; the Go runtime without signal.Notify).
	reraises bool
	// exitsAfterReraise: when the re-raised signal does not kill it (an
	// init), it exits at once with this code (the Go runtime: 2).
	exitsAfterReraise int
	// handle is how the application handles the stop signal itself.
	handle string
	// slow is what to make faster when it took the signal but outlived the
	// grace period.
	slow string
}

var facts = map[Runtime]fact{
	Unknown: {},
	NodeJS: {
		name:     "Node.js",
		reraises: true,
		handle:   "register a handler in the application, `process.on('SIGTERM', () => server.close(() => process.exit(0)))`: Node.js's own handler only resets the terminal and re-raises the signal",
		slow:     "finish the work of the `process.on('SIGTERM')` handler sooner (close the server, then `process.exit`)",
	},
	Go: {
		name:              "the Go runtime",
		reraises:          true,
		exitsAfterReraise: 2,
		handle:            "handle it with `signal.NotifyContext(ctx, syscall.SIGTERM)` and shut down when the context ends (http.Server.Shutdown)",
		slow:              "bound the shutdown that follows `signal.NotifyContext` (a context with a deadline for http.Server.Shutdown)",
	},
	JVM: {
		name:   "the JVM",
		handle: "let the JVM handle it: remove `-Xrs` (it leaves SIGTERM to the default action) and do the cleanup in a shutdown hook (`Runtime.getRuntime().addShutdownHook`)",
		slow:   "make the shutdown hooks finish sooner (the JVM waits for every hook before it exits)",
	},
	CPython: {
		name:   "CPython",
		handle: "install a handler, `signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))`: CPython leaves SIGTERM at its default action",
		slow:   "make the SIGTERM handler's shutdown finish sooner",
	},
	Ruby: {
		name:   "Ruby",
		handle: "trap it, `Signal.trap(\"TERM\") { shutdown; exit }`",
		slow:   "make the `Signal.trap(\"TERM\")` shutdown finish sooner",
	},
	Perl: {
		name:   "Perl",
		handle: "install a handler, `$SIG{TERM} = sub { cleanup(); exit 0 }`: Perl leaves SIGTERM at its default action",
		slow:   "make the `$SIG{TERM}` handler finish sooner",
	},
	Shell: {
		name:   "a shell",
		handle: FixExecForm,
		slow:   "make the trap's shutdown finish sooner",
	},
	Init: {
		name: "an init",
		slow: "make the application that the init passes the signal to shut down sooner",
	},
}

// Reraises reports whether r's default handler for the stop signal
// re-raises it with the default action (Node.js, the Go runtime without
// signal.Notify): as a namespace init such a process never ends by it.
func (r Runtime) Reraises() bool { return facts[r].reraises }

// ExitAfterReraise is the exit code r ends with at once when its re-raised
// signal does not kill it (the Go runtime: 2); 0 when it does not.
func (r Runtime) ExitAfterReraise() int { return facts[r].exitsAfterReraise }

// HandleFix says how an application on r handles the stop signal itself;
// "" for an unknown runtime (the caller keeps its generic fix).
func (r Runtime) HandleFix() string { return facts[r].handle }

// SlowFix says what to make faster when r took the stop signal but
// outlived the grace period; "" for an unknown runtime.
func (r Runtime) SlowFix() string { return facts[r].slow }

// forwardingInits are the inits that pass the stop signal on to their
// child: the one list, used by the timeline and the audit.
var forwardingInits = map[string]bool{
	"tini": true, "tini-static": true, "docker-init": true, "dumb-init": true, "catatonit": true, "s6-svscan": true,
}

// ForwardingInit reports whether name (a command name or an executable's
// base name) is a known init that passes the stop signal on.
func ForwardingInit(name string) bool { return forwardingInits[name] }

// multiCall are executables that run as whichever program argv[0] names.
var multiCall = map[string]bool{"busybox": true, "toybox": true}

var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "ash": true, "busybox": true, "zsh": true, "ksh": true, "mksh": true}

// IsShell reports whether name (argv[0] or a command name) is a shell.
func IsShell(name string) bool { return shells[filepath.Base(strings.TrimSpace(name))] }

// FromName recognises a runtime from a command name or an executable's
// base name alone: what the kernel's events carry. The Go runtime cannot
// be told from a name (Detect reads the executable).
func FromName(name string) Runtime {
	name = filepath.Base(name)
	switch {
	case name == "node" || name == "nodejs":
		return NodeJS
	case name == "java" || name == "jsvc":
		return JVM
	case name == "ruby" || strings.HasPrefix(name, "ruby") && isVersion(name[len("ruby"):]):
		return Ruby
	case name == "perl" || strings.HasPrefix(name, "perl5"):
		return Perl
	case isPython(name):
		return CPython
	case shells[name]:
		return Shell
	case forwardingInits[name]:
		return Init
	}
	return Unknown
}

// isPython matches python, python3, python3.11, python3.11d.
func isPython(name string) bool {
	rest, ok := strings.CutPrefix(name, "python")
	if !ok {
		return false
	}
	return isVersion(strings.TrimRight(rest, "dmu"))
}

// isVersion matches "", "3", "3.11": what follows an interpreter's name.
func isVersion(s string) bool {
	if s == "" {
		return true
	}
	for _, p := range strings.Split(s, ".") {
		if _, err := strconv.Atoi(p); err != nil {
			return false
		}
	}
	return true
}

// Detect recognises the runtime of process pid from procRoot ("" means
// /proc): its executable's name (through the exe link, which resolves in
// the process's own mount namespace), then its command name and argv[0],
// then the executable itself for the Go runtime's build information. It
// reads a few small files and one ELF section table; callers do it once
// per container, never per event. Unknown when nothing matches or the
// process cannot be read.
func Detect(procRoot string, pid int) Runtime {
	if procRoot == "" {
		procRoot = "/proc"
	}
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	var names []string
	if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil {
		// A multi-call binary's name says nothing: busybox is the
		// executable of its sleep as of its sh. The command name and
		// argv[0] name the applet.
		if base := filepath.Base(strings.TrimSuffix(exe, " (deleted)")); !multiCall[base] {
			names = append(names, base)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "comm")); err == nil {
		names = append(names, strings.TrimSpace(string(b)))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil && len(b) > 0 {
		arg0, _, _ := strings.Cut(string(b), "\x00")
		names = append(names, filepath.Base(arg0))
	}
	for _, n := range names {
		if r := FromName(n); r != Unknown {
			return r
		}
	}
	if IsGoBinary(filepath.Join(dir, "exe")) {
		return Go
	}
	return Unknown
}

// IsGoBinary reports whether the ELF file at path was built by the Go
// toolchain: it has the .go.buildinfo section every Go binary since 1.13
// carries (stripped ones too: -s -w keeps it).
func IsGoBinary(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Section(".go.buildinfo") != nil
}
