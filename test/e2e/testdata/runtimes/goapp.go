// A Go service as PID 1 would run it: it stays up until it is stopped.
// Without signal.Notify the Go runtime's own SIGTERM handler restores the
// default action and re-raises; when that does not kill the process (a
// namespace init), the runtime exits 2. With the argument "handle" it waits
// for SIGTERM with signal.NotifyContext, as the fix names, and exits 0.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "handle" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		fmt.Println("ready")
		<-ctx.Done()
		return
	}
	fmt.Println("ready")
	for {
		time.Sleep(time.Hour)
	}
}
