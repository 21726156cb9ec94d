package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sigscope:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError marks bad flags and arguments: exit code 2.
type usageError struct{ error }

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRootCmd().ExecuteContext(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command") {
		return usageError{err}
	}
	return err
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), args[0])}
	}
	return nil
}

func newRootCmd() *cobra.Command {
	var logLevel string
	root := &cobra.Command{
		Use:   "sigscope",
		Short: "Trace Linux signals where the kernel decides their fate",
		Long: `sigscope records every signal at the kernel's signal_generate and signal_deliver
tracepoints and every relevant process exit, and says what happened: delivered,
dropped by a namespace init without a handler (pid1_ignored), or sent by a dying
init to its whole namespace (ns_cascade).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError{fmt.Errorf("--log-level: %w", err)}
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})))
			return nil
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	root.AddCommand(newTraceCmd(), newTimelineCmd(), newAuditCmd(), newServeCmd(), newVersionCmd())
	// --version prints what `sigscope version` does. cobra adds the flag
	// when Version is non-empty and then prints the version template instead
	// of running a command: the template calls versionText, so the build
	// info is read only then, and Version itself is never shown.
	root.Version = "see the version template"
	cobra.AddTemplateFunc("sigscopeVersion", versionText)
	root.SetVersionTemplate(`{{sigscopeVersion}}`)
	root.InitDefaultVersionFlag()
	root.Flags().Lookup("version").Usage = "print the build (as `sigscope version` does)"
	return root
}
