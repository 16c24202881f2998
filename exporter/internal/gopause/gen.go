package gopause

// The BPF object is compiled from bpf/gopause.c by bpf2go (make generate, needs clang and
// libbpf-dev); the generated probes_x86_bpfel.go and .o are committed so a build needs no clang.
// x86-64 only: the program reads the STW reason from AX, Go's first integer argument register there.
//go:generate go tool -modfile=../../../tools/go.mod bpf2go -cc clang -target amd64 -cflags "-O2 -Wall -Werror -I/usr/include/x86_64-linux-gnu" probes bpf/gopause.c
