// Command govictim is stuckvictim.c's Go twin (see there): a Go process stuck in the kernel
// with its mmap_lock held, so that the exporter's Go runtime reads (environ) block too.
// Prints "mapped", reads a line, prints "locking" and faults the page in, then asks for the
// lock for writing and prints "unblocked" once the FUSE server answered; exits at the end
// of stdin.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "govictim:", err)
		os.Exit(1)
	}
	page, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		fmt.Fprintln(os.Stderr, "govictim: mmap:", err)
		os.Exit(1)
	}
	addr := int64(uintptr(unsafe.Pointer(&page[0])))
	fmt.Println("mapped")
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		return
	}
	// Unlike the C victim, the fault starts only now: while it holds the lock, the runtime
	// itself soon wants it for writing (a new thread's stack), and the process stops.
	fmt.Println("locking")
	go func() {
		mem, err := os.Open("/proc/self/mem")
		if err == nil {
			_, err = mem.ReadAt(make([]byte, 1), addr)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "govictim: read /proc/self/mem:", err)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	_, _ = syscall.Mmap(-1, 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	fmt.Println("unblocked")
	_, _ = io.Copy(io.Discard, in)
}
