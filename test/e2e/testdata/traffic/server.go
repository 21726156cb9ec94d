// An HTTP server as a container's main process, in the shapes users run it
// (test/e2e/traffic_test.go). It listens on :8080 (or on its second argument's
// address) and answers every request with "ok", then closes the connection
// (HTTP/1.0). Its first argument says what it does on SIGTERM:
//
//	exit    exits at once, whatever is in flight
//	drain   goes on serving for a second (as a preStop sleep would have it),
//	        then stops accepting, finishes what is in flight and exits 0
//	slow    each request takes 10 s; on SIGTERM it stops accepting and waits
//	        for those in flight (a short grace cuts them)
//	ignore  ignores SIGTERM: serves until the SIGKILL
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	mode := "exit"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mode == "slow" {
			time.Sleep(10 * time.Second)
		}
		fmt.Fprintln(w, "ok")
	})
	addr := ":8080"
	if len(os.Args) > 2 {
		addr = os.Args[2]
	}
	srv := &http.Server{Addr: addr, Handler: handler}
	srv.SetKeepAlivesEnabled(false)
	if mode == "ignore" {
		signal.Ignore(syscall.SIGTERM)
	}
	term := make(chan os.Signal, 1)
	if mode != "ignore" {
		signal.Notify(term, syscall.SIGTERM)
	}
	go func() {
		<-term
		switch mode {
		case "exit":
			os.Exit(0)
		case "drain":
			time.Sleep(time.Second)
		}
		_ = srv.Shutdown(context.Background())
		os.Exit(0)
	}()
	fmt.Println("ready")
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	select {}
}
