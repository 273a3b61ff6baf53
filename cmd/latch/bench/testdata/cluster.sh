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
set -eu
cmd=${1:?usage: cluster.sh start|learners|stop DIR}
dir=${2:?usage: cluster.sh start|learners|stop DIR}
base=${BASE:-17}

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
	for i in 1 2 3; do
		"$dir/bin/latch" cert member --dir "$dir/tls" --id "n$i" --hosts 127.0.0.1,localhost >/dev/null
		"$dir/bin/latchd" --id "n$i" --data-dir "$dir/n$i" --bootstrap "$peers" \
			--client-addr "127.0.0.1:${base}42$i" --raft-addr "127.0.0.1:${base}52$i" \
			--http-addr "127.0.0.1:${base}62$i" --api-addr "127.0.0.1:${base}72$i" --admins bench-admin \
			--cluster-ca "$dir/tls/ca.pem" --member-cert "$dir/tls/member-n$i.pem" --member-key "$dir/tls/member-n$i-key.pem" ${FLAGS:-} \
			>"$dir/n$i.log" 2>&1 &
		echo $! >"$dir/n$i.pid"
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
	eps=$(sed 's/^--endpoints \([^ ]*\) .*/\1/' "$dir/flags")
	admin="--endpoints $eps --ca $dir/tls/ca.pem --cert $dir/tls/client-bench-admin.pem --key $dir/tls/client-bench-admin-key.pem"
	i=3
	while [ $i -lt $((3 + count)) ]; do
		i=$((i + 1))
		"$dir/bin/latch" cert member --dir "$dir/tls" --id "n$i" --hosts 127.0.0.1,localhost >/dev/null
		# shellcheck disable=SC2086 # $admin is a list of flags
		"$dir/bin/latch" $admin member add --learner "n$i" "127.0.0.1:${base}52$i" >/dev/null
		"$dir/bin/latchd" --id "n$i" --data-dir "$dir/n$i" --join "127.0.0.1:${base}621" \
			--client-addr "127.0.0.1:${base}42$i" --raft-addr "127.0.0.1:${base}52$i" \
			--http-addr "127.0.0.1:${base}62$i" --api-addr "127.0.0.1:${base}72$i" --admins bench-admin \
			--cluster-ca "$dir/tls/ca.pem" --member-cert "$dir/tls/member-n$i.pem" --member-key "$dir/tls/member-n$i-key.pem" ${FLAGS:-} \
			>"$dir/n$i.log" 2>&1 &
		echo $! >"$dir/n$i.pid"
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
