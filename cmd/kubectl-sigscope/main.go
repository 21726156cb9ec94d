package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sigscope/sigscope/cmd/kubectl-sigscope/kubeplugin"
	"github.com/sigscope/sigscope/internal/textsafe"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := kubeplugin.NewCommand(os.Stdout, os.Stderr, version).ExecuteContext(ctx)
	stop()
	if err != nil {
		// The error may quote the API server or an agent: escaped for the
		// terminal.
		fmt.Fprintln(os.Stderr, "error:", textsafe.Terminal(err.Error()))
		if kubeplugin.IsUsage(err) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
