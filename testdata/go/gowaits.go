// tests/real_go_goroutines.rs and docs/BENCHMARKS.md (session 24): goroutine waits for the
// goroutine probes, checked against Go's own execution tracer on the same run.
//
//	gowaits trace OUT   goroutines that wait >= 1 ms on channels (a producer sleeping
//	                    2 ms -> relay -> receiver), on a sync.Mutex held 3 ms, on a
//	                    sync.WaitGroup, in time.Sleep and on a TCP connection over
//	                    loopback (network poller), with runtime/trace written to
//	                    OUT; the trace carries the CLOCK_MONOTONIC time (chainrec's trace
//	                    clock) at its start and end as user log events "clock", so that
//	                    its times can be put on chainrec's clock.
//	gowaits pingpong S  two goroutines pass a value back and forth on unbuffered
//	                    channels for S seconds; prints "pingpong N round trips R/s".
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime/trace"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

func mono() int64 {
	var ts syscall.Timespec
	// CLOCK_MONOTONIC = 1 (what bpf_ktime_get_ns reads).
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Sec*1e9 + ts.Nsec
}

// producer sends n values, one every `every` (the receiver's waits end at its timer).
func producer(out chan<- int, n int, every time.Duration) {
	defer close(out)
	for i := range make([]struct{}, n) {
		time.Sleep(every)
		out <- i
	}
}

// relay passes values on: it waits in chan receive, readied by the producer.
func relay(in <-chan int, out chan<- int) {
	defer close(out)
	for {
		v, more := <-in
		if !more {
			return
		}
		out <- v
	}
}

// receiver sums what the relay passes on: it waits in chan receive, readied by the relay.
func receiver(in <-chan int) (sum int) {
	for {
		v, more := <-in
		if !more {
			return sum
		}
		sum += v
	}
}

// holder takes the mutex for 3 ms at a time; waiter blocks on it meanwhile.
func mutexes(n int, wg *sync.WaitGroup) {
	var mu sync.Mutex
	ready := make(chan struct{})
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			mu.Lock()
			if i == 0 {
				close(ready)
			}
			time.Sleep(3 * time.Millisecond)
			mu.Unlock()
			time.Sleep(100 * time.Microsecond)
		}
	}()
	go func() {
		defer wg.Done()
		<-ready
		for i := 0; i < n; i++ {
			mu.Lock()
			mu.Unlock()
			time.Sleep(200 * time.Microsecond)
		}
	}()
}

// network: a reader goroutine reads what a writer sends over loopback TCP, a byte every
// 2 ms: its waits end when the network poller finds the socket readable
// (runtime.netpollready, not runtime.ready).
func network(n int, wg *sync.WaitGroup) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			panic(err)
		}
		buf := make([]byte, 1)
		for i := 0; i < n; i++ {
			if _, err := c.Read(buf); err != nil {
				panic(err)
			}
		}
		c.Close()
		ln.Close()
	}()
	go func() {
		defer wg.Done()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			panic(err)
		}
		for i := 0; i < n; i++ {
			time.Sleep(2 * time.Millisecond)
			if _, err := c.Write([]byte{byte(i)}); err != nil {
				panic(err)
			}
		}
		c.Close()
	}()
}

func workload() {
	a, b, done := make(chan int), make(chan int), make(chan int)
	go producer(a, 300, 2*time.Millisecond)
	go relay(a, b)
	go func() { done <- receiver(b) }()
	var wg sync.WaitGroup
	wg.Add(4)
	mutexes(100, &wg)
	network(200, &wg)
	wg.Wait()
	fmt.Println(<-done)
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: gowaits trace OUT | gowaits pingpong SECONDS")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "trace":
		f, err := os.Create(os.Args[2])
		if err != nil {
			panic(err)
		}
		if err := trace.Start(f); err != nil {
			panic(err)
		}
		ctx := context.Background()
		trace.Log(ctx, "clock", strconv.FormatInt(mono(), 10))
		workload()
		trace.Log(ctx, "clock", strconv.FormatInt(mono(), 10))
		trace.Stop()
		f.Close()
	case "pingpong":
		secs, err := strconv.ParseFloat(os.Args[2], 64)
		if err != nil {
			panic(err)
		}
		ping, pong := make(chan int), make(chan int)
		go func() {
			for v := range ping {
				pong <- v + 1
			}
			close(pong)
		}()
		n := 0
		start := time.Now()
		end := start.Add(time.Duration(secs * float64(time.Second)))
		for time.Now().Before(end) {
			for i := 0; i < 1000; i++ {
				ping <- i
				<-pong
			}
			n += 1000
		}
		close(ping)
		el := time.Since(start).Seconds()
		fmt.Printf("pingpong %d round trips %.0f/s\n", n, float64(n)/el)
	default:
		fmt.Fprintln(os.Stderr, "usage: gowaits trace OUT | gowaits pingpong SECONDS")
		os.Exit(2)
	}
}
