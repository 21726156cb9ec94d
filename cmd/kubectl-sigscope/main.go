package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sigscope/sigscope/internal/kubeplugin"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := kubeplugin.NewCommand(os.Stdout, os.Stderr, version).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		if kubeplugin.IsUsage(err) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
