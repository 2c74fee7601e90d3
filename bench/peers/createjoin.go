// SPDX-License-Identifier: LGPL-2.1-or-later
//
// createjoin - Go's figure for bench/create-join: start goroutines that
// return at once and wait for them.
//
//	-mode chan: each goroutine sends its argument on a channel that the
//	            creator receives from before it starts the next (the
//	            one-at-a-time join, create-join --batch 1);
//	-mode wg:   goroutines in batches of -batch, joined by a
//	            sync.WaitGroup (create-join --batch B).
//
// The creator is the main goroutine.  1% of -n runs first as a warm-up,
// untimed, as in create-join.  Prints one JSON object with ns_per_fiber.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

func oneAtATime(n int) {
	ch := make(chan int)
	for i := 0; i < n; i++ {
		go func(v int) { ch <- v }(i)
		if v := <-ch; v != i {
			fmt.Fprintf(os.Stderr, "createjoin: got %d, want %d\n", v, i)
			os.Exit(1)
		}
	}
}

func batched(n, batch int) {
	var wg sync.WaitGroup
	out := make([]int, batch)
	for done := 0; done < n; done += batch {
		b := batch
		if n-done < b {
			b = n - done
		}
		wg.Add(b)
		for i := 0; i < b; i++ {
			go func(i int) { out[i] = i; wg.Done() }(i)
		}
		wg.Wait()
		for i := 0; i < b; i++ {
			if out[i] != i {
				fmt.Fprintf(os.Stderr, "createjoin: slot %d\n", i)
				os.Exit(1)
			}
		}
	}
}

func main() {
	n := flag.Int("n", 1000000, "goroutines")
	mode := flag.String("mode", "chan", "chan or wg")
	batch := flag.Int("batch", 1000, "batch for -mode wg")
	flag.Parse()
	if *n < 100 || *batch < 1 || (*mode != "chan" && *mode != "wg") {
		fmt.Fprintln(os.Stderr, "createjoin: -n at least 100, -batch at least 1, -mode chan or wg")
		os.Exit(2)
	}
	run := func(k int) {
		if *mode == "chan" {
			oneAtATime(k)
		} else {
			batched(k, *batch)
		}
	}
	run(*n / 100)
	t0 := time.Now()
	run(*n)
	el := time.Since(t0)
	fmt.Printf("{\"bench\":\"createjoin-go\",\"mode\":%q,\"gomaxprocs\":%d,\"n\":%d,\"batch\":%d,\"ns_per_fiber\":%.3f}\n",
		*mode, runtime.GOMAXPROCS(0), *n, *batch, float64(el.Nanoseconds())/float64(*n))
}
