#!/usr/bin/env bash
# sd-cli with modules on sd-rpc-server processes over loopback, on the full-size random
# SD 1.5 checkpoint ($SD_TEST_SD15_MODEL): the same image as the local CPU for every
# placement, cached weights on the second run, a server too small for the UNet used
# through --max-vram cuts, two servers in one generation, a wrong
# token refused, and a server killed mid-generation failing the client cleanly.
# Usage: rpc_cli_test.sh SD_CLI SD_RPC_SERVER SHARED_DIR. Exit 77: skipped.
set -uo pipefail
cli=$1 server=$2 shared=$3
model=${SD_TEST_SD15_MODEL:-}
vocab=$shared/data/clip/bpe_simple_vocab_16e6.txt.gz
if [ -z "$model" ] || [ ! -f "$model" ] || [ ! -f "$vocab" ]; then
  echo "skipped: needs SD_TEST_SD15_MODEL and $vocab"
  exit 77
fi
export SD_CLIP_VOCAB=$vocab
unset SD_RPC_TOKEN SD_RPC_TOKEN_FILE
source "$(dirname "$0")/script_checks.sh"

# Starts a server on a free port; sets $port and $pid. Extra arguments go to the server.
start_server() {
  local log=$work/server$RANDOM
  "$server" --port 0 --threads 2 "$@" >"$log.out" 2>"$log.err" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 50); do
    port=$(sed -n 's/^sd-rpc-server listening on .*:\([0-9]*\)$/\1/p' "$log.out" 2>/dev/null)
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  echo "sd-rpc-server did not start: $(cat "$log.err")"
  exit 1
}

gen=(-m "$model" -p "a photograph of an astronaut riding a horse" -W 64 -H 64 --steps 2 -s 7
  -t 2 --disable-image-metadata)

"$cli" "${gen[@]}" -o "$work/local.png" >/dev/null 2>&1 || fail "local generation"

start_server
a=$port
"$cli" "${gen[@]}" -o "$work/r1.png" --rpc-servers "127.0.0.1:$a" --backend diffusion=RPC0 \
  >"$work/r1.log" 2>&1 || fail "diffusion=RPC0: $(tail -3 "$work/r1.log")"
cmp -s "$work/local.png" "$work/r1.png" || fail "diffusion=RPC0 image differs from the local one"
sent1=$(sed -n 's/.*weights \(.*\) sent, \(.*\) from the server.s cache.*/\1 | \2/p' "$work/r1.log" | tail -1)
echo "first run, weights sent | from cache: $sent1"

"$cli" "${gen[@]}" -o "$work/r2.png" --rpc-servers "127.0.0.1:$a" --backend RPC0 \
  --params-backend disk >"$work/r2.log" 2>&1 || fail "RPC0 + disk: $(tail -3 "$work/r2.log")"
cmp -s "$work/local.png" "$work/r2.png" || fail "RPC0 with --params-backend disk differs"
sent2=$(sed -n 's/.*weights \(.*\) sent, \(.*\) from the server.s cache.*/\1 | \2/p' "$work/r2.log" | tail -1)
echo "second run, weights sent | from cache: $sent2"
# Only the text encoder and VAE are new on the second run; the UNet comes from the cache.
case "$sent2" in
  *" | 1."*" GB") ;;
  *) fail "the second run did not take the UNet from the server's cache: $sent2" ;;
esac

"$cli" --rpc-servers "127.0.0.1:$a" --list-devices >"$work/list.txt" 2>&1
grep -q "^RPC0	.*127.0.0.1:$a.*GiB free" "$work/list.txt" || fail "--list-devices: $(cat "$work/list.txt")"

# A device too small for the UNet's weights (1.7 GB into a 1 GiB server): --max-vram cuts
# the graph into segments whose weights take turns on it, with and without prefetch; the
# image is the same, and the client holds none of the UNet's weights for long.
start_server --mem 1024
m=$port
for stream in "" --stream-layers; do
  "$cli" "${gen[@]}" -o "$work/cut$stream.png" --rpc-servers "127.0.0.1:$m" \
    --backend diffusion=RPC0 --params-backend diffusion=cpu --max-vram 1 $stream \
    >"$work/cut$stream.log" 2>&1 || fail "--max-vram 1 $stream: $(tail -3 "$work/cut$stream.log")"
  cmp -s "$work/local.png" "$work/cut$stream.png" || fail "--max-vram 1 $stream: image differs"
  grep -q "diffusion: [2-9] segments on RPC0 within 1.00 GiB" "$work/cut$stream.log" ||
    fail "--max-vram 1 $stream did not cut: $(grep -i segment "$work/cut$stream.log")"
  echo "cut $stream: $(grep -o 'diffusion: [0-9]* segments.*' "$work/cut$stream.log")"
done
grep -q "(prefetch)" "$work/cut--stream-layers.log" || fail "--stream-layers did not prefetch"
# Without the cut the same placement cannot run there, and says why.
"$cli" "${gen[@]}" -o "$work/nocut.png" --rpc-servers "127.0.0.1:$m" --backend diffusion=RPC0 \
  >"$work/nocut.log" 2>&1 && fail "the UNet fit a 1 GiB server without --max-vram"
grep -q "mem" "$work/nocut.log" || fail "no --mem in the refusal: $(tail -2 "$work/nocut.log")"
[ -e "$work/nocut.png" ] && fail "an image was written although the UNet did not fit"

# Two servers, different modules in one generation.
start_server
b=$port
"$cli" "${gen[@]}" -o "$work/r3.png" --rpc-servers "127.0.0.1:$a,127.0.0.1:$b" \
  --backend te=RPC1,diffusion=RPC0,vae=RPC1 >"$work/r3.log" 2>&1 ||
  fail "two servers: $(tail -3 "$work/r3.log")"
cmp -s "$work/local.png" "$work/r3.png" || fail "two servers: image differs"

# A wrong token is refused, clearly, and writes nothing.
SD_RPC_TOKEN=right start_server
t=$port
SD_RPC_TOKEN=wrong "$cli" "${gen[@]}" -o "$work/r4.png" --rpc-servers "127.0.0.1:$t" \
  --backend RPC0 >"$work/r4.log" 2>&1 && fail "a wrong token was accepted"
grep -q "token" "$work/r4.log" || fail "wrong token message: $(tail -3 "$work/r4.log")"
[ -e "$work/r4.png" ] && fail "an image was written despite the refused token"

# A server killed mid-generation: the client fails within the bound, naming the server,
# and writes no image.
start_server
k=$port
kpid=$pid
"$cli" "${gen[@]}" -W 128 -H 128 --steps 30 -o "$work/r5.png" --rpc-servers "127.0.0.1:$k" \
  --backend diffusion=RPC0 >"$work/r5.log" 2>&1 &
client=$!
for _ in $(seq 600); do
  grep -q "sampling\|1/30" "$work/r5.log" 2>/dev/null && break
  sleep 0.1
done
sleep 2
kill -9 "$kpid"
killed_at=$(date +%s)
wait "$kpid" 2>/dev/null
wait "$client"
status=$?
elapsed=$(($(date +%s) - killed_at))
[ "$status" -ne 0 ] || fail "the client succeeded although its server was killed"
[ "$elapsed" -le 15 ] || fail "the client took ${elapsed}s to notice the dead server"
grep -q "127.0.0.1:$k" "$work/r5.log" || fail "the error does not name the server: $(tail -3 "$work/r5.log")"
[ -e "$work/r5.png" ] && fail "a partial image was written"
echo "killed server noticed after ${elapsed}s: $(grep -o '\[RPC [^]]*\][^;]*' "$work/r5.log" | head -1)"

finish "all RPC command-line checks passed"
