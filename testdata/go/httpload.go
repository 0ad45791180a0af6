// tests/real_go.rs (issue 38's HTTP criterion): a net/http server and a client loading it
// over loopback, in two processes of this one binary (run without arguments it serves on
// 127.0.0.1 and starts itself as `httpload client ADDR`). Two processes so that the only
// link between a handler goroutine and the client goroutine that sent it a request is the
// kernel's: the client's write, the loopback's NET_RX softirq, the epoll wakeup of the
// server's netpoller thread. Built with the machine's Go (Debian 12: 1.19).
//
// The client runs 4 goroutines, each sending GET requests one after the other on its own
// keep-alive connection for 2 s, so that between requests each server connection's
// goroutine (net/http.(*conn).serve) waits for the next one in netpoll ("IO wait").
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"
)

const (
	clients  = 4
	duration = 2 * time.Second
)

func handler(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, "ok\n")
}

func client(addr string) {
	// As many connections as goroutines, no more: otherwise the first requests' dials
	// race and a spare connection may sit idle through the whole run.
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	c := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	end := time.Now().Add(duration)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for time.Now().Before(end) {
				resp, err := c.Get("http://" + addr + "/")
				if err != nil {
					fmt.Fprintln(os.Stderr, "httpload client:", err)
					os.Exit(1)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				n++
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	// Closed here rather than by the exit, so that the connections' last wait on the
	// server ends at a goroutine's close (each connection's read loop), not at the
	// kernel's cleanup of the process.
	tr.CloseIdleConnections()
	fmt.Printf("%d requests\n", total)
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "client" {
		client(os.Args[2])
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpload:", err)
		os.Exit(1)
	}
	go http.Serve(ln, http.HandlerFunc(handler))
	cmd := exec.Command(os.Args[0], "client", ln.Addr().String())
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "httpload: client:", err)
		os.Exit(1)
	}
}
