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
//
// The keep-alive shapes (HTTP/1.1, connections kept between requests):
//
//	ka-closeidle  on SIGTERM keeps listening and serving for a second, but
//	              closes every idle keep-alive connection every 20 ms, under
//	              its clients (what many graceful shutdowns do), then exits
//	ka-drain      on SIGTERM answers each next request with Connection:
//	              close for a second (the clients move), then stops
//	              accepting, finishes what is in flight and exits 0
//	ka-exit       exits at once on SIGTERM, keep-alive connections open
//
//	call-out      on SIGTERM calls its sidecar, which stopped first
//	              (127.0.0.1:9090, nothing listens) ten times, and each
//	              further argument's address ten times, prints how many of
//	              its calls were refused ("refused N") and exits 0
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	mode := "exit"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	var draining atomic.Bool
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mode == "slow" {
			time.Sleep(10 * time.Second)
		}
		if draining.Load() {
			w.Header().Set("Connection", "close")
		}
		fmt.Fprintln(w, "ok")
	})
	addr := ":8080"
	if len(os.Args) > 2 {
		addr = os.Args[2]
	}
	// The connections idle between two requests, for ka-closeidle.
	var mu sync.Mutex
	idle := map[net.Conn]bool{}
	srv := &http.Server{Addr: addr, Handler: handler, ConnState: func(c net.Conn, st http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		if st == http.StateIdle {
			idle[c] = true
		} else {
			delete(idle, c)
		}
	}}
	keepAlive := strings.HasPrefix(mode, "ka-")
	srv.SetKeepAlivesEnabled(keepAlive)
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
		case "exit", "ka-exit":
			os.Exit(0)
		case "drain":
			time.Sleep(time.Second)
		case "ka-drain":
			draining.Store(true)
			time.Sleep(time.Second)
		case "call-out":
			refused := 0
			for _, to := range append([]string{"127.0.0.1:9090"}, os.Args[min(3, len(os.Args)):]...) {
				for range 10 {
					c, err := net.DialTimeout("tcp", to, 500*time.Millisecond)
					if err == nil {
						c.Close()
					} else if errors.Is(err, syscall.ECONNREFUSED) {
						refused++
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			fmt.Println("refused", refused)
			os.Exit(0)
		case "ka-closeidle":
			for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				mu.Lock()
				for c := range idle {
					c.Close()
					delete(idle, c)
				}
				mu.Unlock()
			}
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
