#!/usr/bin/env bash
# sd-rpc-server under a connection flood (plain TCP connects, no token, held then closed):
# the next client must be served. First with the common soft limit of 1024 descriptors,
# which the server raises; then with a hard limit too low to ride the flood out, where
# gRPC's accept loop fails and the server restarts its listener.
# Usage: rpc_flood_test.sh SD_CLI SD_RPC_SERVER
set -uo pipefail
cli=$1 server=$2
source "$(dirname "$0")/script_checks.sh"
unset SD_RPC_TOKEN SD_RPC_TOKEN_FILE

# flood PORT COUNT HOLD_SECONDS: opens COUNT connections, holds them, closes them.
flood() {
  /usr/bin/python3 - "$@" <<'PY'
import resource, socket, sys, time
port, count, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held, refused = [], 0
for _ in range(count):
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
    except OSError:
        refused += 1
print(f"flood: {len(held)} connections held, {refused} not opened")
time.sleep(hold)
for s in held:
    s.close()
PY
}

# start_server NAME ULIMIT_ARGS: starts it on a free port; sets $port and $log.
start_server() {
  local name=$1
  shift
  log=$work/$name.log
  (ulimit "$@" && exec "$server" --host 127.0.0.1 --port 0 -t 1) >"$log" 2>&1 &
  pids+=($!)
  port=
  for _ in $(seq 100); do
    port=$(sed -n 's/^sd-rpc-server listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$log" 2>/dev/null)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { fail "$name: server did not start"; cat "$log"; return 1; }
}

# served NAME: a client lists the server's device within 60 s of the flood's end (a client
# that arrives while the listener restarts is refused and tries again); prints how long.
served() {
  local start now
  start=$(date +%s%N)
  while :; do
    if timeout 60 "$cli" --rpc-servers "127.0.0.1:$port" --list-devices >"$work/$1.out" 2>&1 &&
      grep -q "^RPC0" "$work/$1.out"; then
      now=$(date +%s%N)
      echo "$1: a client was served $(((now - start) / 1000000)) ms after the flood closed"
      return
    fi
    now=$(date +%s%N)
    if [ $(((now - start) / 1000000000)) -ge 60 ]; then
      fail "$1: no client served within 60 s"
      cat "$work/$1.out" "$log"
      return
    fi
    sleep 0.2
  done
}

hard=$(ulimit -Hn)
if [ "$hard" = unlimited ] || [ "$hard" -ge 2048 ]; then
  start_server soft_limit -Sn 1024 && {
    flood "$port" 1100 2
    served soft_limit
    grep -q "open-file limit raised from 1024" "$log" || fail "soft_limit: limit not raised"
  }
else
  echo "soft_limit: skipped (hard descriptor limit $hard is below 2048)"
fi

start_server hard_limit -n 256 && {
  flood "$port" 400 2
  served hard_limit
  grep -q "listening again" "$log" || { fail "hard_limit: listener not restarted"; cat "$log"; }
}

finish "the server kept serving through every flood"
