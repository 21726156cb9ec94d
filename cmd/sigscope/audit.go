package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sigscope/sigscope/containers/container"
	"github.com/sigscope/sigscope/episodes/audit"
	"github.com/sigscope/sigscope/internal/textsafe"
	"github.com/sigscope/sigscope/tracer"
)

func newAuditCmd() *cobra.Command {
	var (
		output string
		server serverFlags
		rt     runtimeFlags
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Predict how each running container's main process will take its stop signal",
		Long: `For every running container the local runtimes report (Docker Engine API, CRI),
read how its main process (the one the runtime signals: PID 1 of the
container's pid namespace, or another process when it shares one) takes the
stop signal, and predict the stop: "graceful" when it catches the signal, waits
for it (sigtimedwait, a signalfd: tini, catatonit) or, not being a namespace
init, is killed by it; "ignored_by_init" when the kernel will drop it at a
namespace init (no handler, SIG_IGN, or a one-shot SA_RESETHAND handler that
re-raises it, as Node.js's own does); "ignored" when a process that is no init
ignores it; "killed" when the stop signal is SIGKILL.

RUNTIME is the main process's language runtime (nodejs, go, jvm, cpython,
ruby, perl, shell, init; "-" when not recognised), read from its executable:
it decides what a handler achieves (the Go runtime's exits with status 2 when
its re-raise is dropped) and which fix a hint names.

SOURCE says where the masks came from: "kernel", a BPF task iterator that reads
the kernel's own state (root, or CAP_BPF and CAP_PERFMON); or "proc",
/proc/PID/status, used when the iterator cannot load. /proc cannot show a
signal waited for in sigtimedwait, so it takes tini for a shell.

Needs read access to /proc/PID of the containers' processes (root on most hosts).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAudit(cmd.Context(), output, &server, rt.options(), os.Stdout)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	server.register(cmd.Flags())
	rt.register(cmd.Flags())
	return cmd
}

func runAudit(ctx context.Context, output string, server *serverFlags, opts container.Options, stdout io.Writer) error {
	if output != "table" && output != "json" {
		return usageError{fmt.Errorf("--output %q: want table or json", output)}
	}
	var results []audit.Result
	if server.url != "" {
		if err := server.get(ctx, "/api/v1/audit", nil, &results); err != nil {
			return err
		}
	} else {
		// A one-shot audit looks at live processes only: no cgroup watch.
		opts.NoCgroupWatch = true
		r := container.NewResolver(opts)
		defer r.Close()
		var err error
		results, err = audit.RunWith(ctx, r, audit.Options{ReadTaskStates: tracer.ReadTaskStates})
		if err != nil && len(results) == 0 {
			return fmt.Errorf("listing containers: %w (is a container runtime running and its socket readable?)", err)
		}
		if err != nil {
			slog.Warn("some runtimes could not be listed", "error", err)
		}
	}
	return writeAudit(stdout, output, results)
}

// writeAudit prints results as JSON lines or as the table and its hints.
// Results may come from a remote agent: every string is escaped.
func writeAudit(stdout io.Writer, output string, results []audit.Result) error {
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for i := range results {
			if err := enc.Encode(&results[i]); err != nil {
				return err
			}
		}
		return nil
	}
	const format = "%-24s  %-8s  %-32s  %-7s  %-7s  %-7s  %-6s  %-15s\n"
	fmt.Fprintf(w, format, "CONTAINER", "PID", "COMMAND", "RUNTIME", "SIGNAL", "CATCHES", "SOURCE", "PREDICTION")
	for _, res := range results {
		cmdline := textsafe.Cell(textsafe.Terminal(strings.Join(res.PID1.Cmdline, " ")), 32)
		rt := textsafe.Cell(textsafe.Terminal(string(res.PID1.Runtime)), 16)
		fmt.Fprintf(w, format, identityCell(res.Container.Identity), strconv.Itoa(res.PID1.PID), cmdline, orDash(rt),
			textsafe.Terminal(res.StopSignal), strconv.FormatBool(res.Catches), textsafe.Terminal(orDash(res.Source)), textsafe.Terminal(res.Prediction))
	}
	for _, res := range results {
		if res.Hint != "" || res.Error != "" {
			// Hints quote comms and command lines: escaped like the table.
			fmt.Fprintf(w, "\n%s: %s%s\n", identityCell(res.Container.Identity), textsafe.Terminal(res.Hint), textsafe.Terminal(res.Error))
		}
	}
	return nil
}

// orDash shows an empty cell as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
