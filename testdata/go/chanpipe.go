// tests/real_go.rs: a receiver <- relay <- producer channel pipeline (the producer sleeps
// 5 ms between values), built with the Go of the machine (Debian 12: 1.19). Half-way, the
// runtime's own dump of every goroutine's stack goes to stderr (the independent reference
// the test compares the recorded stacks with).
package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"time"
)

func producer(out chan<- int) {
	for i := 0; i < 200; i++ {
		time.Sleep(5 * time.Millisecond)
		out <- i
	}
	close(out)
}

func relay(in <-chan int, out chan<- int) {
	for v := range in {
		out <- v
	}
	close(out)
}

func receiver(in <-chan int, done chan<- int) {
	s := 0
	for v := range in {
		s += v
	}
	done <- s
}

func main() {
	a, b, done := make(chan int), make(chan int), make(chan int)
	go producer(a)
	go relay(a, b)
	go receiver(b, done)
	go func() {
		time.Sleep(500 * time.Millisecond)
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
	}()
	fmt.Println(<-done)
}
