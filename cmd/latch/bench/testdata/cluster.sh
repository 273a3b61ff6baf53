#!/bin/sh
# Starts or stops a 3-member latchd cluster on loopback for `latch bench`
# measurements (fsync is always on in latchd; raft timeouts are latchd's
# defaults). Run from the repository root:
#
#   sh cmd/latch/bench/testdata/cluster.sh start DIR   # builds, starts, prints the latch flags
#   DIR/bin/latch $(cat DIR/flags) bench get
#   sh cmd/latch/bench/testdata/cluster.sh learners DIR [N]  # adds N learners (default 2)
#   sh cmd/latch/bench/testdata/cluster.sh stop DIR    # kills the members, removes DIR
#
# learners adds n4.. as non-voters (`latch member add --learner`, then
# latchd --join), waits until each is ready and appends their client
# addresses to DIR/flags' --endpoints.
# Members n1..n3: client UDP 127.0.0.1:1742{1,2,3}, raft TCP 1752x, admin
# HTTPS 1762x, HTTP/JSON API 1772x (BASE=N changes 17 to N). Logs are in
# DIR/nX.log. Certificates (`latch cert`) are in DIR/tls. BIN=PATH takes
# latchd and latch from PATH instead of building them (to compare an old
# build with a new one in one session); FLAGS="..." adds latchd flags to
# every member (e.g. raft timeouts). LOOPFS=1 (root only; skipped with a
# message otherwise) puts each member's data dir n1..n3 on a loop-mounted
# ext4 of its own (DIR/nX.img), so `latch bench storm --kill freeze` can
# fsfreeze one; stop thaws, unmounts and detaches them.
#
# CPU budgets: CPU=0.25 (cores, at least 0.1) gives every member, learners
# included, a CPU budget of its own, as if each ran on a small host of its
# own: each latchd runs in a cgroup of the v1 cpu controller,
# /sys/fs/cgroup/cpu/latch-<hash of DIR>-nN, with cpu.cfs_quota_us =
# CPU x cpu.cfs_period_us (10 ms, so a member that spent its budget waits
# at most a few ms, not a 100 ms default period). On one shared host,
# spreading reads over members adds no capacity, since every member draws
# on the same cores; with budgets, what members add can be measured, as
# long as the members, not the (uncapped) load generator, run out first
# (`latch bench --member-cpu` prints each member's CPU next to its
# budget). A cgroup escapes nice, so each group's cpu.shares is the
# kernel's weight of this script's nice value times the threads Go runs
# (`nice -n 15 sh cluster.sh` keeps the members at nice 15's weight), or
# SHARES=N. With the kernel's autogroup on, the host's ungrouped
# processes compete as one group per session, of weight 1024 however
# many they are, and nice only orders them within it: members at nice
# 15's weight then get far less than uncapped members would (a busy loop
# capped at 0.1 core got 1% of a core at shares 72, 7% at 1024, 13%
# uncapped at nice 15, with load 50). start records CPU and the shares in
# DIR/cpu and DIR/shares and learners uses them unless CPU is given; stop
# removes the groups. Without root or the controller it says so and the
# members run uncapped.
set -eu
cmd=${1:?usage: cluster.sh start|learners|stop DIR}
dir=${2:?usage: cluster.sh start|learners|stop DIR}
base=${BASE:-17}
cpu_root=/sys/fs/cgroup/cpu
cpu_period=10000

# cpu_budget sets quota and shares for CPU (cores per member), or leaves
# quota empty (uncapped) with a message saying why.
cpu_budget() {
	quota=""
	[ -n "${CPU:-}" ] || return 0
	if ! quota=$(awk -v c="$CPU" -v p=$cpu_period 'BEGIN { if (c !~ /^[0-9]*[.]?[0-9]+$/ || c + 0 < 0.1) exit 1; printf "%d", c * p }'); then
		echo "CPU=$CPU: want a number of cores, at least 0.1" >&2
		exit 2
	fi
	if [ "$(id -u)" != 0 ]; then
		echo "CPU=$CPU needs root (a cgroup per member): the members run uncapped" >&2
		quota=""
	elif [ ! -f "$cpu_root/cpu.cfs_quota_us" ]; then
		echo "CPU=$CPU needs the cgroup v1 cpu controller at $cpu_root: the members run uncapped" >&2
		quota=""
	fi
	# A group competes with the host's other tasks as one task of weight
	# cpu.shares, whatever its nice; an uncapped latchd competes as up to
	# GOMAXPROCS running threads (Go makes that max(2, ceil(CPU)) in a
	# capped group, at most the host's CPUs), each of its nice value's
	# weight (the kernel's sched_prio_to_weight).
	shares=${SHARES:-$(awk -v n="$(cut -d' ' -f19 /proc/$$/stat)" -v c="$CPU" -v cpus="$(getconf _NPROCESSORS_ONLN)" 'BEGIN {
		split("1024 820 655 526 423 335 272 215 172 137 110 87 70 56 45 36 29 23 18 15", w, " ")
		if (n < 0) n = 0
		p = int(c); if (p < c) p++; if (p < 2) p = 2; if (p > cpus) p = cpus
		print w[n + 1] * p }')}
	if [ -n "$quota" ] && [ -z "${SHARES:-}" ] && [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ]; then
		echo "CPU=$CPU: the kernel groups this session's other processes (autogroup), which then weigh 1024 together: members with cpu.shares $shares get far less than uncapped ones under load (SHARES=N sets it; cluster.sh header)" >&2
	fi
	cpu_group=$cpu_root/latch-$(cd "$dir" && pwd | cksum | cut -d' ' -f1)
}

# launch I ARGS... starts member nI (latchd ARGS...) in its cgroup when
# there is a budget, logging to DIR/nI.log; its pid goes to DIR/nI.pid.
launch() {
	i=$1
	shift
	cg=""
	if [ -n "$quota" ]; then
		cg=$cpu_group-n$i
		if mkdir -p "$cg" 2>/dev/null && echo $cpu_period >"$cg/cpu.cfs_period_us" &&
			echo "$quota" >"$cg/cpu.cfs_quota_us" && echo "$shares" >"$cg/cpu.shares"; then
			echo "$cg" >"$dir/n$i.cgroup"
		else
			echo "n$i: cannot set up $cg: it runs uncapped" >&2
			cg=""
		fi
	fi
	# The shell joins the group, then becomes latchd: no moment outside it.
	CG=$cg sh -c 'if [ -n "$CG" ]; then echo $$ >"$CG/cgroup.procs"; fi; exec "$0" "$@"' \
		"$dir/bin/latchd" --id "n$i" --data-dir "$dir/n$i" \
		--client-addr "127.0.0.1:${base}42$i" --raft-addr "127.0.0.1:${base}52$i" \
		--http-addr "127.0.0.1:${base}62$i" --api-addr "127.0.0.1:${base}72$i" --admins bench-admin \
		--cluster-ca "$dir/tls/ca.pem" --member-cert "$dir/tls/member-n$i.pem" --member-key "$dir/tls/member-n$i-key.pem" \
		"$@" >"$dir/n$i.log" 2>&1 &
	echo $! >"$dir/n$i.pid"
}

case $cmd in
start)
	mkdir -p "$dir/bin"
	if [ -n "${BIN:-}" ]; then
		cp "$BIN/latchd" "$BIN/latch" "$dir/bin/"
	else
		go build -o "$dir/bin/latchd" ./cmd/latchd
		go build -o "$dir/bin/latch" ./cmd/latch
	fi
	"$dir/bin/latch" cert ca --dir "$dir/tls" >/dev/null
	"$dir/bin/latch" cert client --dir "$dir/tls" --name bench-admin >/dev/null
	peers=""
	for i in 1 2 3; do
		peers="$peers${peers:+,}n$i=127.0.0.1:${base}52$i"
	done
	if [ "${LOOPFS:-}" = 1 ] && [ "$(id -u)" != 0 ]; then
		echo "LOOPFS=1 needs root (losetup, mount): the data dirs stay on $dir's file system" >&2
	elif [ "${LOOPFS:-}" = 1 ]; then
		for i in 1 2 3; do
			truncate -s 1G "$dir/n$i.img"
			loop=$(losetup -f --show "$dir/n$i.img")
			echo "$loop" >"$dir/n$i.loop"
			mkfs.ext4 -q "$loop"
			mkdir -p "$dir/n$i"
			mount "$loop" "$dir/n$i"
		done
	fi
	cpu_budget
	if [ -n "$quota" ]; then
		echo "$CPU" >"$dir/cpu"
		echo "$shares" >"$dir/shares"
	fi
	for i in 1 2 3; do
		"$dir/bin/latch" cert member --dir "$dir/tls" --id "n$i" --hosts 127.0.0.1,localhost >/dev/null
		# shellcheck disable=SC2086 # FLAGS is a list of flags
		launch $i --bootstrap "$peers" ${FLAGS:-}
	done
	for i in 1 2 3; do
		n=0
		until curl -sf --cacert "$dir/tls/ca.pem" "https://127.0.0.1:${base}62$i/readyz" >/dev/null; do
			n=$((n + 1))
			if [ $n -gt 300 ]; then
				echo "n$i not ready after 30s; see $dir/n$i.log" >&2
				exit 1
			fi
			sleep 0.1
		done
	done
	echo "--endpoints 127.0.0.1:${base}421,127.0.0.1:${base}422,127.0.0.1:${base}423 --ca $dir/tls/ca.pem" >"$dir/flags"
	cat "$dir/flags"
	;;
learners)
	count=${3:-2}
	if [ -z "${CPU:-}" ] && [ -f "$dir/cpu" ]; then
		CPU=$(cat "$dir/cpu") SHARES=${SHARES:-$(cat "$dir/shares")}
	fi
	cpu_budget
	eps=$(sed 's/^--endpoints \([^ ]*\) .*/\1/' "$dir/flags")
	admin="--endpoints $eps --ca $dir/tls/ca.pem --cert $dir/tls/client-bench-admin.pem --key $dir/tls/client-bench-admin-key.pem"
	i=3
	while [ $i -lt $((3 + count)) ]; do
		i=$((i + 1))
		"$dir/bin/latch" cert member --dir "$dir/tls" --id "n$i" --hosts 127.0.0.1,localhost >/dev/null
		# shellcheck disable=SC2086 # $admin is a list of flags
		"$dir/bin/latch" $admin member add --learner "n$i" "127.0.0.1:${base}52$i" >/dev/null
		# shellcheck disable=SC2086 # FLAGS is a list of flags
		launch $i --join "127.0.0.1:${base}621" ${FLAGS:-}
		n=0
		until curl -sf --cacert "$dir/tls/ca.pem" "https://127.0.0.1:${base}62$i/readyz" >/dev/null; do
			n=$((n + 1))
			if [ $n -gt 300 ]; then
				echo "n$i not ready after 30s; see $dir/n$i.log" >&2
				exit 1
			fi
			sleep 0.1
		done
		eps="$eps,127.0.0.1:${base}42$i"
	done
	echo "--endpoints $eps --ca $dir/tls/ca.pem" >"$dir/flags"
	cat "$dir/flags"
	;;
stop)
	# A frozen member cannot exit: thaw first.
	for f in "$dir"/n*.loop; do
		if [ -f "$f" ]; then
			fsfreeze -u "${f%.loop}" 2>/dev/null || true
		fi
	done
	for f in "$dir"/n*.pid; do
		if [ -f "$f" ]; then
			kill "$(cat "$f")" 2>/dev/null || true
		fi
	done
	for f in "$dir"/n*.pid; do
		if [ -f "$f" ]; then
			pid=$(cat "$f")
			n=0
			while kill -0 "$pid" 2>/dev/null && [ $n -lt 100 ]; do
				sleep 0.1
				n=$((n + 1))
			done
			kill -9 "$pid" 2>/dev/null || true
		fi
	done
	# A group with no process left can go (the kernel may take a moment
	# to let go of the last one).
	for f in "$dir"/n*.cgroup; do
		if [ -f "$f" ]; then
			n=0
			until rmdir "$(cat "$f")" 2>/dev/null || [ ! -d "$(cat "$f")" ] || [ $n -gt 50 ]; do
				sleep 0.1
				n=$((n + 1))
			done
			if [ -d "$(cat "$f")" ]; then
				echo "cannot remove $(cat "$f"): $(cat "$(cat "$f")/cgroup.procs" | wc -l) processes left in it" >&2
			fi
		fi
	done
	for f in "$dir"/n*.loop; do
		if [ -f "$f" ]; then
			umount "${f%.loop}" || true
			losetup -d "$(cat "$f")" || true
		fi
	done
	rm -rf "$dir"
	;;
*)
	echo "usage: cluster.sh start|learners|stop DIR [N]" >&2
	exit 2
	;;
esac
