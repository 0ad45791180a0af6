// tests/real_go_goroutines.rs (the GC stop-the-world test) and docs/BENCHMARKS.md (session
// 26): goroutines ping-ponging on unbuffered channels (20 µs of work per round trip)
// beside a goroutine that allocates and forces a GC every 2 ms, so that readied goroutines often wait through a GC
// stop-the-world before they run.
//
//	gcstw S [OUT]  runs for S seconds; with OUT, Go's execution tracer (runtime/trace)
//	               writes to OUT, with the CLOCK_MONOTONIC time (chainrec's trace clock)
//	               at its start and end as user log events "clock". Prints
//	               "gcstw N round trips R/s, G GCs".
package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/trace"
	"strconv"
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

var sink [][]byte

func main() {
	secs, _ := strconv.ParseFloat(os.Args[1], 64)
	if len(os.Args) > 2 {
		f, err := os.Create(os.Args[2])
		if err != nil {
			panic(err)
		}
		if err := trace.Start(f); err != nil {
			panic(err)
		}
		trace.Log(context.Background(), "clock", strconv.FormatInt(mono(), 10))
		defer func() {
			trace.Log(context.Background(), "clock", strconv.FormatInt(mono(), 10))
			trace.Stop()
			f.Close()
		}()
	}
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	stop := make(chan struct{})
	done := make(chan int)
	// Two ping-pong pairs.
	for p := 0; p < 2; p++ {
		ping, pong := make(chan int), make(chan int)
		go func() {
			for v := range ping {
				pong <- v + 1
			}
			close(pong)
		}()
		go func() {
			n := 0
			for {
				select {
				case <-stop:
					close(ping)
					done <- n
					return
				default:
				}
				ping <- n
				<-pong
				n++
				// Some work between round trips (the probes' rate stays in bounds).
				for t := time.Now(); time.Since(t) < 20*time.Microsecond; {
				}
			}
		}()
	}
	// The allocator: garbage, and a forced GC every 2 ms.
	gcs := 0
	go func() {
		for {
			select {
			case <-stop:
				done <- 0
				return
			default:
			}
			for i := 0; i < 64; i++ {
				sink = append(sink, make([]byte, 1024))
			}
			if len(sink) > 4096 {
				sink = nil
			}
			runtime.GC()
			gcs++
			time.Sleep(2 * time.Millisecond)
		}
	}()
	start := time.Now()
	time.Sleep(time.Until(end))
	close(stop)
	n := 0
	for i := 0; i < 3; i++ {
		n += <-done
	}
	el := time.Since(start).Seconds()
	fmt.Printf("gcstw %d round trips %.0f/s, %d GCs\n", n, float64(n)/el, gcs)
}
