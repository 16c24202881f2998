// Command fuseserver mounts a one-file FUSE file system whose reads are not answered until
// it is told to: the tests use it to put a real process into a page fault that does not
// return (the process's mmap_lock held), as NFS, FUSE or a stuck disk do on real nodes.
//
// It is a separate process (and module) on purpose: a FUSE server that lives in the test
// process would be blocked by the test's own accesses to the mount, and the file system
// must outlive nothing but this process (its death aborts the connection, which unblocks
// every waiter).
//
// Protocol on stdin/stdout, one line each: it prints "ready <mountpoint>" once mounted and
// "read <offset>" whenever the kernel asks for data; the line "answer" on stdin makes it
// answer every read, held or future; end of input unmounts and exits.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

const fileSize = 1 << 20

var (
	answer     = make(chan struct{})
	answerOnce sync.Once
	outMu      sync.Mutex
)

func say(format string, args ...any) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Printf(format+"\n", args...)
}

type root struct{ fs.Inode }

var _ = (fs.NodeOnAdder)((*root)(nil))

func (r *root) OnAdd(ctx context.Context) {
	r.AddChild("data", r.NewPersistentInode(ctx, &dataFile{}, fs.StableAttr{Mode: syscall.S_IFREG}), false)
}

// dataFile is fileSize bytes of 'x' that are served only once "answer" was read.
type dataFile struct{ fs.Inode }

var (
	_ = (fs.NodeGetattrer)((*dataFile)(nil))
	_ = (fs.NodeOpener)((*dataFile)(nil))
	_ = (fs.NodeReader)((*dataFile)(nil))
)

func (f *dataFile) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Size = fileSize
	return 0
}

// Open keeps the page cache: without FOPEN_KEEP_CACHE the kernel would invalidate it on each
// open, which waits for the page an unanswered read has locked.
func (f *dataFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

// Read holds the request until "answer": the kernel's request (a page fault's readahead) is
// not interruptible, so the context is not watched.
func (f *dataFile) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	say("read %d", off)
	<-answer
	n := int64(len(dest))
	if off >= fileSize {
		n = 0
	} else if off+n > fileSize {
		n = fileSize - off
	}
	for i := range dest[:n] {
		dest[i] = 'x'
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func main() {
	log.SetFlags(0)
	mnt := flag.String("mount", "", "mountpoint (an empty directory)")
	flag.Parse()
	if *mnt == "" {
		log.Fatal("fuseserver: -mount is required")
	}
	server, err := fs.Mount(*mnt, &root{}, &fs.Options{MountOptions: fuse.MountOptions{
		// Mount with mount(2) as root: no fusermount needed, and no fallback to it.
		DirectMount: true, DirectMountStrict: true,
		FsName: "quota-exporter-test", Name: "stuckfs",
	}})
	if err != nil {
		log.Fatalf("fuseserver: mount: %v", err)
	}
	say("ready %s", *mnt)
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			if in.Text() == "answer" {
				answerOnce.Do(func() { close(answer) })
				say("answering")
			}
		}
		answerOnce.Do(func() { close(answer) })
		if err := server.Unmount(); err != nil {
			log.Printf("fuseserver: unmount: %v", err)
		}
	}()
	server.Wait()
}
