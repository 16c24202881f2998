package gopause

// The BPF object is compiled from bpf/gopause.c by bpf2go (make generate, needs clang and
// libbpf-dev); the generated probes_x86_bpfel.go and .o are committed so a build needs no clang.
// One object per architecture: the program reads the STW reason from Go's first integer
// argument register (AX on x86-64, R0 on arm64); the uapi headers under
// /usr/include/x86_64-linux-gnu are the generic ones, the same for both BPF targets.
//go:generate go tool -modfile=../../../tools/go.mod bpf2go -cc clang -target amd64,arm64 -cflags "-O2 -Wall -Werror -I/usr/include/x86_64-linux-gnu" probes bpf/gopause.c
