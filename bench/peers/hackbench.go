// SPDX-License-Identifier: LGPL-2.1-or-later
//
// hackbench - Go's figure for bench/hackbench: -g groups of -f senders
// and -f receivers; each sender sends -l messages of -s bytes to each
// receiver of its group, over one buffered channel per receiver
// (capacity -cap, the pipe buffer's stand-in: a sender blocks when its
// receiver falls behind, as on a full pipe).  The messages are copied,
// as a pipe copies them: by value through channels of 128-byte arrays
// for -s up to 128 (no allocation per message), or, with -slices or a
// larger -s, into a new []byte per message sent on a chan []byte (an
// allocation and a pointer per message, the way such a benchmark is
// often first written in Go).  Prints one JSON object with seconds.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

const maxSize = 4096

// small is a message of at most 128 bytes, sent by value: the channel
// copies it in and out, as a pipe does, with no allocation per message.
type small [128]byte

func main() {
	groups := flag.Int("g", 10, "groups")
	fds := flag.Int("f", 20, "senders and receivers per group")
	loops := flag.Int("l", 100, "messages per sender and receiver")
	size := flag.Int("s", 100, "bytes per message")
	capacity := flag.Int("cap", 512, "channel capacity")
	slices := flag.Bool("slices", false, "send a new []byte per message")
	flag.Parse()
	if *groups < 1 || *fds < 1 || *loops < 1 || *size < 1 ||
		*size > maxSize || *capacity < 0 {
		fmt.Fprintln(os.Stderr, "hackbench: bad argument")
		os.Exit(2)
	}
	if *size <= len(small{}) && !*slices {
		runSmall(*groups, *fds, *loops, *size, *capacity)
		return
	}
	type payload = []byte
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	var received int64
	var mu sync.Mutex
	for g := 0; g < *groups; g++ {
		chans := make([]chan payload, *fds)
		for r := range chans {
			chans[r] = make(chan payload, *capacity)
			ready.Add(1)
			done.Add(1)
			go func(c chan payload) {
				var sink [maxSize]byte
				got := int64(0)
				ready.Done()
				<-start
				for i := 0; i < *fds**loops; i++ {
					m := <-c
					copy(sink[:], m)
					got++
				}
				mu.Lock()
				received += got
				mu.Unlock()
				done.Done()
			}(chans[r])
		}
		for s := 0; s < *fds; s++ {
			ready.Add(1)
			done.Add(1)
			go func() {
				src := make([]byte, *size)
				ready.Done()
				<-start
				for l := 0; l < *loops; l++ {
					for _, c := range chans {
						m := make([]byte, *size)
						copy(m, src)
						c <- m
					}
				}
				done.Done()
			}()
		}
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	done.Wait()
	el := time.Since(t0).Seconds()
	want := int64(*groups) * int64(*fds) * int64(*fds) * int64(*loops)
	if received != want {
		fmt.Fprintf(os.Stderr, "hackbench: received %d of %d\n", received, want)
		os.Exit(1)
	}
	fmt.Printf("{\"bench\":\"hackbench-go\",\"messages_by\":\"slice\",\"gomaxprocs\":%d,\"messages\":%d,\"seconds\":%.6f}\n",
		runtime.GOMAXPROCS(0), want, el)
}

// runSmall - the same run with messages sent by value.
func runSmall(groups, fds, loops, size, capacity int) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	var received int64
	var mu sync.Mutex
	for g := 0; g < groups; g++ {
		chans := make([]chan small, fds)
		for r := range chans {
			chans[r] = make(chan small, capacity)
			ready.Add(1)
			done.Add(1)
			go func(c chan small) {
				var sink small
				got := int64(0)
				ready.Done()
				<-start
				for i := 0; i < fds*loops; i++ {
					sink = <-c
					got++
				}
				_ = sink
				mu.Lock()
				received += got
				mu.Unlock()
				done.Done()
			}(chans[r])
		}
		for s := 0; s < fds; s++ {
			ready.Add(1)
			done.Add(1)
			go func() {
				var m small
				for i := 0; i < size; i++ {
					m[i] = byte(i)
				}
				ready.Done()
				<-start
				for l := 0; l < loops; l++ {
					for _, c := range chans {
						c <- m
					}
				}
				done.Done()
			}()
		}
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	done.Wait()
	el := time.Since(t0).Seconds()
	want := int64(groups) * int64(fds) * int64(fds) * int64(loops)
	if received != want {
		fmt.Fprintf(os.Stderr, "hackbench: received %d of %d\n", received, want)
		os.Exit(1)
	}
	fmt.Printf("{\"bench\":\"hackbench-go\",\"messages_by\":\"value\",\"gomaxprocs\":%d,\"messages\":%d,\"seconds\":%.6f}\n",
		runtime.GOMAXPROCS(0), want, el)
}
