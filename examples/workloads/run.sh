#!/usr/bin/env bash
# run.sh start|stop|status|build|ident [scenario...]
#
# Builds the demo workloads and runs each one in its own cgroup with its own CPU quota (and a
# memory limit where it matters), so that the five field reports in ../../shared/seeds happen
# for real on this host. Needs root. Without scenario names it acts on all of them.
#
#   cgroup v1: /sys/fs/cgroup/{cpu,cpuacct,cpuset,memory}/quota-demo/<scenario>
#   cgroup v2: <cgroup2 mount>/quota-demo/<scenario>, when a cgroup2 mount has the cpu controller
#   (quota-demo is $QUOTA_DEMO_CGROUP when set)
#
# With QUOTA_DEMO_LAYOUT=kubepods each scenario runs as the one container of a Kubernetes pod, laid
# out as the kubelet's cgroupfs driver does: <parent>/kubepods/burstable/pod<uid>/<64-hex id>, the
# pod with the same CPU quota and memory limit as its container (a single-container pod's limits
# are its container's), and the kubelet's log directories written under $QUOTA_DEMO_PODLOGS
# (default $QUOTA_DEMO_DIR/podlogs: pods/<ns>_<pod>_<uid>/<container>/ and
# containers/<pod>_<ns>_<container>-<id>.log) so that the exporter, run with
# --path.podlogs=<that dir>, names them: namespace quota-demo, pod <scenario>-<hash>, container
# <scenario>. `run.sh ident NAME` prints a scenario's cgroup path, namespace, pod and container.
#
# start is idempotent (a running scenario is left alone, leftovers of a failed run are cleaned
# first) and a scenario that fails to start is removed again; stop kills what runs in the
# cgroups and removes them, whether or not start completed.
#
# Environment: QUOTA_DEMO_DIR (build output, logs and pid files; default /tmp/quota-demo),
# QUOTA_DEMO_CGROUP (name of the parent cgroup, default quota-demo: a second stack, such as the
# end-to-end test next to a running demo, uses its own so neither touches the other's cgroups),
# QUOTA_US_<scenario, '-' as '_'> overrides a scenario's quota in µs per 100 ms period, e.g.
# QUOTA_US_jvm_gc_storm=300000 for the 3-core quota of the LinkedIn case on a bigger host.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STATE=${QUOTA_DEMO_DIR:-/tmp/quota-demo}
BUILD=$STATE/build
LOGS=$STATE/logs
PIDS=$STATE/pids
V1=/sys/fs/cgroup
V1_CONTROLLERS=(cpu cpuacct cpuset memory)
PARENT=${QUOTA_DEMO_CGROUP:-quota-demo}
[[ $PARENT =~ ^[A-Za-z0-9._-]+$ ]] || { echo "run.sh: bad QUOTA_DEMO_CGROUP '$PARENT'" >&2; exit 1; }
PERIOD_US=100000
LAYOUT=${QUOTA_DEMO_LAYOUT:-flat}
[[ $LAYOUT == flat || $LAYOUT == kubepods ]] || { echo "run.sh: bad QUOTA_DEMO_LAYOUT '$LAYOUT' (flat|kubepods)" >&2; exit 1; }
PODLOGS=${QUOTA_DEMO_PODLOGS:-$STATE/podlogs}
NAMESPACE=quota-demo

ALL=(jvm-gc-storm jvm-warmup go-gomaxprocs rss-creep rss-creep-control kernel-contention jvm-healthy go-healthy oom-crash)
ARCHETYPES=(bursty-200 bursty-300 cpu-batch jvm-gc-live jvm-gc-small jvm-calm go-sidecar)

log() { printf 'run.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# Kubernetes identity of a scenario in the kubepods layout, stable across runs: the pod UID from
# the name, the container id from the name and the restart count (a restarted container gets a
# new id and cgroup, as with the kubelet).
pod_uid() { printf '%s' "$1" | md5sum | sed -E 's/^(.{8})(.{4})(.{4})(.{4})(.{12}).*/\1-\2-\3-\4-\5/'; }
pod_name() { local u; u=$(pod_uid "$1"); echo "$1-${u:0:5}"; }
restarts() { cat "$PIDS/$1.restarts" 2>/dev/null || echo 0; }
container_id() { printf '%s/%s' "$1" "$(restarts "$1")" | sha256sum | cut -c1-64; }

# pod_rel NAME / rel NAME: a scenario's pod and container cgroup under the parent.
pod_rel() { echo "kubepods/burstable/pod$(pod_uid "$1")"; }
rel() {
	if [[ $LAYOUT == kubepods ]]; then echo "$(pod_rel "$1")/$(container_id "$1")"; else echo "$1"; fi
}

# write_podlogs NAME writes the kubelet's log directories of the scenario's pod and container.
write_podlogs() {
	local name=$1 uid pod cid
	uid=$(pod_uid "$name") pod=$(pod_name "$name") cid=$(container_id "$name")
	mkdir -p "$PODLOGS/pods/${NAMESPACE}_${pod}_${uid}/$name" "$PODLOGS/containers"
	: >"$PODLOGS/pods/${NAMESPACE}_${pod}_${uid}/$name/$(restarts "$name").log"
	ln -sf "$PODLOGS/pods/${NAMESPACE}_${pod}_${uid}/$name/$(restarts "$name").log" \
		"$PODLOGS/containers/${pod}_${NAMESPACE}_${name}-${cid}.log"
}

ident() {
	local name=$1
	if [[ $LAYOUT == kubepods ]]; then
		echo "/$PARENT/$(rel "$name") $NAMESPACE $(pod_name "$name") $name"
	else
		echo "/$PARENT/$name - - -"
	fi
}

# spec NAME sets QUOTA_US, MEM_LIMIT (bytes, 0 = none) and CMD (the workload's command line).
spec() {
	local name=$1
	MEM_LIMIT=0
	case $name in
	jvm-gc-storm) # seed 000: 18 parallel GC threads in a 1-core quota
		QUOTA_US=100000 MEM_LIMIT=$((512 << 20))
		CMD=(java -XX:ActiveProcessorCount=24 -XX:+UseParallelGC -Xms96m -Xmx96m
			"-Xlog:gc:file=$LOGS/jvm-gc-storm.gc.log" -cp "$BUILD/java/gc-storm" GcStorm 2) ;;
	jvm-warmup) # seed 001: JIT-heavy first minute in a 1-core quota, quiet later
		QUOTA_US=100000 MEM_LIMIT=$((512 << 20))
		CMD=(java -Xms128m -Xmx128m -cp "$BUILD/java/warmup" Warmup 4) ;;
	go-gomaxprocs) # seed 004: GOMAXPROCS=16 under a 0.5-core quota, 4 busy handlers (long STW pauses)
		QUOTA_US=50000 MEM_LIMIT=$((512 << 20))
		CMD=(env GOMAXPROCS=16 "$BUILD/go-gomaxprocs" -busy 4) ;;
	rss-creep) # seed 003: glibc arenas grow with threads (default limit: 8 x host CPUs)
		QUOTA_US=100000 MEM_LIMIT=$((2 << 30))
		CMD=(env -u MALLOC_ARENA_MAX -u GLIBC_TUNABLES "$BUILD/rss_creep" 32 256) ;;
	rss-creep-control) # seed 003's fix: the same program with two arenas
		QUOTA_US=100000 MEM_LIMIT=$((2 << 30))
		CMD=(env -u GLIBC_TUNABLES MALLOC_ARENA_MAX=2 "$BUILD/rss_creep" 32 256) ;;
	kernel-contention) # seed 002: threads contending on one file's kernel lock under quota
		QUOTA_US=100000 MEM_LIMIT=$((256 << 20))
		CMD=("$BUILD/kernel_contention" "$BUILD/shared.dat" 32) ;;
	jvm-healthy) # control: GC/JIT threads sized to the 2-core quota, light load
		QUOTA_US=200000 MEM_LIMIT=$((512 << 20))
		CMD=(java -XX:ActiveProcessorCount=2 -XX:ParallelGCThreads=2 -XX:+UseParallelGC -Xmx128m
			-cp "$BUILD/java/healthy" Healthy 20) ;;
	go-healthy) # control: GOMAXPROCS=2 on a 2-core quota, light load
		QUOTA_US=200000 MEM_LIMIT=$((512 << 20))
		CMD=(env GOMAXPROCS=2 "$BUILD/go-healthy" -rate 20) ;;
	oom-crash) # a container OOM-killed after $OOM_AFTER s (default 20); once restarted it only sleeps
		QUOTA_US=100000 MEM_LIMIT=$((32 << 20))
		if (($(restarts "$name") == 0)); then
			CMD=(/bin/sh -c 'sleep "$1"; exec tail /dev/zero' sh "${OOM_AFTER:-20}")
		else
			CMD=(sleep 1000000)
		fi ;;
	# Issue 25's archetypes (make record-workloads, make bench-precision; not in ALL): each the one
	# container of a 0.5-core pod. Healthy ones must page nothing.
	bursty-200) # healthy: 2 threads x 40 ms every 200 ms (0.4 cores, about half the periods throttled)
		QUOTA_US=50000 MEM_LIMIT=$((64 << 20))
		CMD=("$BUILD/bursty" 2 40 200) ;;
	bursty-300) # healthy: 2 threads x 40 ms every 300 ms (a fifth of the periods throttled)
		QUOTA_US=50000 MEM_LIMIT=$((64 << 20))
		CMD=("$BUILD/bursty" 2 40 300) ;;
	cpu-batch) # healthy by design: one thread computing without pause at its limit
		QUOTA_US=50000 MEM_LIMIT=$((64 << 20))
		CMD=("$BUILD/bursty" 1 1 1) ;;
	jvm-gc-live) # seed 000 at 0.5 cores: 18 GC threads, a 250 MiB live set of 512-byte entries marked by every full GC
		QUOTA_US=50000 MEM_LIMIT=$((768 << 20))
		CMD=(java -XX:ActiveProcessorCount=24 -XX:+UseParallelGC -Xms400m -Xmx400m -cp "$BUILD/java/gc-live" GcLive 250 40 2 512) ;;
	jvm-gc-small) # 18 GC threads, a small live set: never throttled, misconfigured all the same
		QUOTA_US=50000 MEM_LIMIT=$((256 << 20))
		CMD=(java -XX:ActiveProcessorCount=24 -XX:+UseParallelGC -Xmx128m -cp "$BUILD/java/gc-live" GcLive 8 40 2) ;;
	jvm-calm) # healthy: a JVM sized to its limit, light load
		QUOTA_US=50000 MEM_LIMIT=$((256 << 20))
		CMD=(java -XX:ActiveProcessorCount=1 -XX:+UseSerialGC -Xmx96m -cp "$BUILD/java/healthy" Healthy 5) ;;
	go-sidecar) # an idle Go sidecar whose GOMAXPROCS (64) is far above its limit
		QUOTA_US=50000 MEM_LIMIT=$((128 << 20))
		CMD=(env GOMAXPROCS=64 "$BUILD/go-healthy" -rate 1) ;;
	*) die "unknown scenario '$name' (known: ${ALL[*]} ${ARCHETYPES[*]})" ;;
	esac
	local override="QUOTA_US_${name//-/_}"
	QUOTA_US=${!override:-$QUOTA_US}
}

# stale OUT SRC... is true when OUT is missing or older than any SRC.
stale() {
	local out=$1 src
	shift
	[[ -e $out ]] || return 0
	for src in "$@"; do [[ $src -nt $out ]] && return 0; done
	return 1
}

build() {
	local name=$1 w=$HERE
	mkdir -p "$BUILD" "$LOGS" "$PIDS"
	case $name in
	jvm-gc-storm)
		stale "$BUILD/java/gc-storm/GcStorm.class" "$w/jvm-gc-storm/GcStorm.java" &&
			javac -d "$BUILD/java/gc-storm" "$w/jvm-gc-storm/GcStorm.java" ;;
	jvm-warmup)
		if stale "$BUILD/java/warmup/Warmup.class" "$w/jvm-warmup/Warmup.java" "$w/jvm-warmup/GenHot.java"; then
			rm -rf "$BUILD/warmup-src" "$BUILD/java/warmup"
			java "$w/jvm-warmup/GenHot.java" "$BUILD/warmup-src" 6000
			javac -d "$BUILD/java/warmup" "$BUILD"/warmup-src/*.java "$w/jvm-warmup/Warmup.java"
		fi ;;
	jvm-gc-live | jvm-gc-small)
		stale "$BUILD/java/gc-live/GcLive.class" "$w/jvm-gc-live/GcLive.java" &&
			javac -d "$BUILD/java/gc-live" "$w/jvm-gc-live/GcLive.java" ;;
	bursty-200 | bursty-300 | cpu-batch)
		stale "$BUILD/bursty" "$w/bursty/bursty.c" &&
			gcc -O1 -Wall -pthread -o "$BUILD/bursty" "$w/bursty/bursty.c" ;;
	go-sidecar) build go-healthy ;;
	jvm-calm) build jvm-healthy ;;
	jvm-healthy)
		stale "$BUILD/java/healthy/Healthy.class" "$w/jvm-healthy/Healthy.java" &&
			javac -d "$BUILD/java/healthy" "$w/jvm-healthy/Healthy.java" ;;
	go-gomaxprocs | go-healthy)
		# Each program is its own module (go-gomaxprocs says "go 1.24": not container-aware).
		(cd "$w/$name" && GOTOOLCHAIN=local CGO_ENABLED=0 go build -trimpath -o "$BUILD/$name" .) ;;
	rss-creep | rss-creep-control)
		stale "$BUILD/rss_creep" "$w/rss-creep/rss_creep.c" &&
			gcc -O2 -Wall -pthread -o "$BUILD/rss_creep" "$w/rss-creep/rss_creep.c" ;;
	kernel-contention)
		stale "$BUILD/kernel_contention" "$w/kernel-contention/kernel_contention.c" &&
			gcc -O2 -Wall -pthread -o "$BUILD/kernel_contention" "$w/kernel-contention/kernel_contention.c"
		[[ -s $BUILD/shared.dat ]] || head -c 4096 /dev/urandom >"$BUILD/shared.dat" ;;
	esac
	return 0
}

# v2_mount prints the first cgroup2 mount whose root offers the cpu controller, if any.
v2_mount() {
	local m
	for m in $(awk '$3 == "cgroup2" { print $2 }' /proc/mounts); do
		if grep -qw cpu "$m/cgroup.controllers" 2>/dev/null; then
			echo "$m"
			return
		fi
	done
}

# dirs NAME prints every cgroup directory of a scenario (existing or to be created).
dirs() {
	local c v2
	for c in "${V1_CONTROLLERS[@]}"; do
		[[ -e $V1/$c/cgroup.procs && ! -e $V1/$c/cgroup.subtree_control ]] && echo "$V1/$c/$PARENT/$(rel "$1")"
	done
	v2=$(v2_mount)
	if [[ -n $v2 ]]; then echo "$v2/$PARENT/$(rel "$1")"; fi
	return 0
}

procs() { # PIDs in a scenario's cgroups, deduplicated
	local d
	for d in $(dirs "$1"); do cat "$d/cgroup.procs" 2>/dev/null || true; done | sort -un
}

running() {
	local pid
	[[ -f $PIDS/$1.pid ]] || return 1
	pid=$(<"$PIDS/$1.pid")
	kill -0 "$pid" 2>/dev/null && procs "$1" | grep -qx "$pid"
}

create_cgroups() {
	local name=$1 d v2 r seg segs f
	spec "$name"
	for d in $(dirs "$name"); do mkdir -p "$d"; done
	# Every level from the parent down gets cpuset CPUs (v1) and the controllers (v2); the
	# container, and in the kubepods layout its pod before it (v1 refuses a child quota above
	# its parent's), get the limits.
	local levels=("$PARENT") limited=("$PARENT/$(rel "$name")")
	r=$PARENT
	IFS=/ read -ra segs <<<"$(rel "$name")"
	for seg in "${segs[@]}"; do r+="/$seg" && levels+=("$r"); done
	[[ $LAYOUT == kubepods ]] && limited=("$PARENT/$(pod_rel "$name")" "${limited[@]}")
	v2=$(v2_mount)
	if [[ -n $v2 ]]; then
		# v2: controllers must be enabled top-down before a cgroup gets cpu.max/memory.max.
		local ctl=+cpu
		grep -qw memory "$v2/cgroup.controllers" && ctl="+cpu +memory"
		echo "$ctl" >"$v2/cgroup.subtree_control"
		for r in "${levels[@]:0:${#levels[@]}-1}"; do echo "$ctl" >"$v2/$r/cgroup.subtree_control"; done
		for r in "${limited[@]}"; do
			echo "$QUOTA_US $PERIOD_US" >"$v2/$r/cpu.max"
			if ((MEM_LIMIT > 0)) && [[ -e $v2/$r/memory.max ]]; then echo "$MEM_LIMIT" >"$v2/$r/memory.max"; fi
		done
	fi
	if [[ -d $V1/cpuset/$PARENT ]]; then
		# v1 cpuset: a new cgroup has no CPUs or memory nodes until given its parent's.
		for f in cpuset.cpus cpuset.mems; do
			for r in "${levels[@]}"; do cat "$V1/cpuset/$f" >"$V1/cpuset/$r/$f"; done
		done
	fi
	for r in "${limited[@]}"; do
		if [[ -d $V1/cpu/$r ]]; then
			echo "$PERIOD_US" >"$V1/cpu/$r/cpu.cfs_period_us"
			echo "$QUOTA_US" >"$V1/cpu/$r/cpu.cfs_quota_us"
		fi
		if ((MEM_LIMIT > 0)) && [[ -d $V1/memory/$r ]]; then
			echo "$MEM_LIMIT" >"$V1/memory/$r/memory.limit_in_bytes"
		fi
	done
	if [[ $LAYOUT == kubepods ]]; then write_podlogs "$name"; fi
	return 0
}

start_one() {
	local name=$1 pid procfiles="" d
	if running "$name"; then
		log "$name: already running (pid $(<"$PIDS/$name.pid"))"
		return 0
	fi
	stop_one "$name" quiet # leftovers of an earlier, partial run
	build "$name" || { log "$name: build failed"; return 1; }
	create_cgroups "$name" || { log "$name: cannot create cgroups"; stop_one "$name" quiet; return 1; }
	spec "$name"
	for d in $(dirs "$name"); do procfiles+=" $d/cgroup.procs"; done
	# The shell joins every cgroup first and then execs the workload, so nothing runs outside
	# the quota; setsid keeps the workloads alive after this script (and its terminal) exits.
	QD_PROCS=$procfiles setsid /bin/sh -c \
		'for f in $QD_PROCS; do echo $$ >"$f" || exit 111; done; exec "$@"' sh "${CMD[@]}" \
		>"$LOGS/$name.log" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$PIDS/$name.pid"
	sleep 0.5
	if ! running "$name"; then
		log "$name: did not stay up; last lines of $LOGS/$name.log:"
		tail -n 5 "$LOGS/$name.log" >&2 || true
		stop_one "$name" quiet
		return 1
	fi
	log "$name: pid $pid, quota ${QUOTA_US}us/${PERIOD_US}us, log $LOGS/$name.log"
}

stop_one() {
	local name=$1 quiet=${2:-} pids d i
	# Only processes inside our own cgroups are signalled: a recorded pid may have been reused.
	pids=$(procs "$name")
	if [[ -n $pids ]]; then
		kill -TERM $pids 2>/dev/null || true
		for i in $(seq 50); do
			[[ -z $(procs "$name") ]] && break
			sleep 0.1
		done
		kill -KILL $(procs "$name") 2>/dev/null || true
	fi
	for d in $(dirs "$name"); do
		[[ -d $d ]] || continue
		for i in $(seq 50); do
			rmdir "$d" 2>/dev/null && break
			kill -KILL $(cat "$d/cgroup.procs" 2>/dev/null) 2>/dev/null || true
			sleep 0.1
		done
		[[ -d $d ]] && log "$name: could not remove $d"
		if [[ $LAYOUT == kubepods && $quiet != keep-pod ]]; then rmdir "$(dirname "$d")" 2>/dev/null || true; fi
	done
	rm -f "$PIDS/$name.pid"
	[[ -z $quiet ]] && log "$name: stopped"
	return 0
}

remove_parents() {
	local d p
	for d in $(dirs x); do
		p=${d%%/"$(rel x)"}
		if [[ $LAYOUT == kubepods ]]; then rmdir "$p/kubepods/burstable" "$p/kubepods" 2>/dev/null || true; fi
		rmdir "$p" 2>/dev/null || true
	done
}

# restart_one NAME: what the kubelet does when a container exits: the old container's cgroup is
# removed at once, the new one gets a new id (and cgroup) in the same pod; the old one's logs stay.
restart_one() {
	local name=$1 n
	stop_one "$name" keep-pod
	n=$(($(restarts "$name") + 1))
	echo "$n" >"$PIDS/$name.restarts"
	start_one "$name"
}

# kv FILE KEY prints KEY's value from a "key value" file, or - when absent.
kv() { awk -v k="$2" '$1 == k { print $2; found = 1 } END { if (!found) print "-" }' "$1" 2>/dev/null || echo -; }

status() {
	printf '%-18s %-8s %-7s %10s %12s %14s %10s %10s %10s\n' scenario pid quota nr_periods nr_throttled throttled_s user_s system_s mem_MiB
	local name pid cpu acct mem q
	for name in "$@"; do
		spec "$name"
		pid=-
		running "$name" && pid=$(<"$PIDS/$name.pid")
		cpu=$V1/cpu/$PARENT/$(rel "$name") acct=$V1/cpuacct/$PARENT/$(rel "$name") mem=$V1/memory/$PARENT/$(rel "$name")
		if [[ ! -d $cpu ]]; then
			local v2
			v2=$(v2_mount)
			local c2=$v2/$PARENT/$(rel "$name")
			[[ -n $v2 && -d $c2 ]] || { printf '%-18s %-8s (no cgroup)\n' "$name" "$pid"; continue; }
			local s=$c2/cpu.stat
			printf '%-18s %-8s %-7s %10s %12s %14s %10s %10s %10s\n' "$name" "$pid" "$(cut -d' ' -f1 "$c2/cpu.max")" \
				"$(kv "$s" nr_periods)" "$(kv "$s" nr_throttled)" "$(awk '$1=="throttled_usec"{printf "%.1f", $2/1e6}' "$s")" \
				"$(awk '$1=="user_usec"{printf "%.1f", $2/1e6}' "$s")" "$(awk '$1=="system_usec"{printf "%.1f", $2/1e6}' "$s")" \
				"$(( $(cat "$c2/memory.current" 2>/dev/null || echo 0) >> 20 ))"
			continue
		fi
		q=$(cat "$cpu/cpu.cfs_quota_us")
		printf '%-18s %-8s %-7s %10s %12s %14s %10s %10s %10s\n' "$name" "$pid" "$q" \
			"$(kv "$cpu/cpu.stat" nr_periods)" "$(kv "$cpu/cpu.stat" nr_throttled)" \
			"$(awk '$1=="throttled_time"{printf "%.1f", $2/1e9}' "$cpu/cpu.stat")" \
			"$(awk '$1=="user"{printf "%.1f", $2/100}' "$acct/cpuacct.stat" 2>/dev/null)" \
			"$(awk '$1=="system"{printf "%.1f", $2/100}' "$acct/cpuacct.stat" 2>/dev/null)" \
			"$(( $(cat "$mem/memory.usage_in_bytes" 2>/dev/null || echo 0) >> 20 ))"
	done
}

main() {
	local cmd=${1:-}
	[[ -n $cmd ]] || die "usage: $0 start|stop|restart|status|build|ident [scenario...]"
	shift
	local names=("$@")
	((${#names[@]})) || names=("${ALL[@]}")
	local n
	for n in "${names[@]}"; do spec "$n"; done # reject unknown names before doing anything
	case $cmd in
	start)
		[[ $(id -u) == 0 ]] || die "start needs root (it creates cgroups)"
		local failed=0
		for n in "${names[@]}"; do start_one "$n" || failed=1; done
		return $failed ;;
	stop)
		[[ $(id -u) == 0 ]] || die "stop needs root"
		for n in "${names[@]}"; do stop_one "$n"; done
		remove_parents ;;
	restart)
		[[ $(id -u) == 0 ]] || die "restart needs root"
		for n in "${names[@]}"; do restart_one "$n"; done ;;
	ident) for n in "${names[@]}"; do ident "$n"; done ;;
	status) status "${names[@]}" ;;
	build) for n in "${names[@]}"; do build "$n"; done ;;
	*) die "unknown command '$cmd' (start|stop|restart|status|build|ident)" ;;
	esac
}

main "$@"
