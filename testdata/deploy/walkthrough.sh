#!/bin/sh
# From nothing to a 3-member TLS cluster on one machine (loopback), then a
# learner, a backup restored into a second cluster, and a removal.
# Needs latchd and latch on PATH. BASE picks the ports (member N uses
# BASE+10N .. BASE+10N+3); DIR is where everything goes.
set -eu
BASE=${BASE:-17000}
DIR=${DIR:-latch-walkthrough}
mkdir -p "$DIR" && cd "$DIR"

addr() { echo "127.0.0.1:$((BASE + 10 * $1 + $2))"; }  # member $1: 0 client, 1 raft, 2 admin, 3 HTTP API
start() {                                                # start member n$1 with more flags, in the background
  n=$1; shift
  latchd --id "n$n" --data-dir "data/n$n" \
    --client-addr "$(addr "$n" 0)" --raft-addr "$(addr "$n" 1)" --http-addr "$(addr "$n" 2)" --api-addr "$(addr "$n" 3)" \
    --cluster-ca certs/ca.pem --member-cert "certs/member-n$n.pem" --member-key "certs/member-n$n-key.pem" \
    --admins ops "$@" >"n$n.log" 2>&1 &
  echo $! >"n$n.pid"
}
retry() {                                                # run "$@" until it succeeds, for up to 30 s
  i=0
  until "$@" >/dev/null 2>&1; do
    i=$((i + 1)); [ "$i" -lt 150 ] || { echo "gave up waiting for: $*" >&2; exit 1; }
    sleep 0.2
  done
}
trap 'for f in n*.pid; do kill "$(cat "$f")" 2>/dev/null || true; done' EXIT

# 1. Certificates: a cluster CA, one certificate per member, one for the operator "ops".
latch cert ca --dir certs
for n in 1 2 3 4 5 6 7; do latch cert member --dir certs --id "n$n" --hosts 127.0.0.1,localhost; done
latch cert client --dir certs --name ops

# 2. Three members bootstrapped together; the CLI reads its flags from the environment.
boot="n1=$(addr 1 1),n2=$(addr 2 1),n3=$(addr 3 1)"
for n in 1 2 3; do start "$n" --bootstrap "$boot"; done
export LATCH_ENDPOINTS="$(addr 1 0),$(addr 2 0),$(addr 3 0)"
export LATCH_CA=certs/ca.pem LATCH_CERT=certs/client-ops.pem LATCH_KEY=certs/client-ops-key.pem
retry latch create /config v1
latch status

# 3. A learner: added to the configuration first, then started with --join; promoted once it caught up.
latch member add --learner n4 "$(addr 4 1)"
start 4 --join "$(addr 1 2)"
retry sh -c "latch member list | grep -q '^n4 .*learner .*$(addr 4 0)'"
latch member promote n4        # four voters: latch warns that an even number tolerates no more failures than three
latch member list

# 4. A backup of the running cluster, checked.
latch set /config v2
latch snapshot save backup.latch
latch snapshot status backup.latch

# 5. Restore it into a new, empty 3-member cluster.
boot2="n5=$(addr 5 1),n6=$(addr 6 1),n7=$(addr 7 1)"
for n in 5 6 7; do start "$n" --bootstrap "$boot2"; done
retry latch --endpoints "$(addr 5 0)" status
latch --endpoints "$(addr 5 0),$(addr 6 0),$(addr 7 0)" snapshot restore backup.latch
latch --endpoints "$(addr 5 0),$(addr 6 0),$(addr 7 0)" get /config     # prints v2

# 6. Remove a member from the first cluster: it stops by itself.
latch member remove n4
retry grep -q "removed from the cluster" n4.log
wait "$(cat n4.pid)"
latch member list
echo "walkthrough done"
