#!/usr/bin/env bash
# The UNet on an sd-rpc-server over loopback, whole and cut by --max-vram, with and without
# --stream-layers: seconds per step (the mean of the steps after the first), weight bytes
# sent per step, the client's peak RSS, and whether the image equals the uncut one. Rows
# alternate, `rounds` times. Prints a Markdown table.
#
#   bench/max_vram.sh SD_CLI SD_RPC_SERVER MODEL [SIZE] [STEPS] [BUDGET_GIB] [ROUNDS]
#                     (defaults: 256, 4, 1, 2)
#
# Needs SD_CLIP_VOCAB. The server of the cut rows has --mem of the budget, so the UNet's
# weights cannot sit there whole; the uncut row's server has room for them.
set -euo pipefail
cli=$1 server=$2 model=$3 size=${4:-256} steps=${5:-4} budget=${6:-1} rounds=${7:-2}
out=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$out"' EXIT

start_server() {  # MEM_MIB -> $port
  "$server" --port 0 --threads 2 --mem "$1" >"$out/server$1.out" 2>/dev/null &
  pids+=($!)
  for _ in $(seq 100); do
    port=$(sed -n 's/^sd-rpc-server listening on .*:\([0-9]*\)$/\1/p' "$out/server$1.out" 2>/dev/null)
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  echo "sd-rpc-server did not start" >&2
  exit 1
}
start_server 8192
roomy=$port
start_server "$(awk -v g="$budget" 'BEGIN { printf "%d", g * 1024 }')"
tight=$port

gen=(-m "$model" -p "a photograph of an astronaut riding a horse" -s 42 -t 2 -W "$size" -H "$size"
  --steps "$steps" --disable-image-metadata --backend diffusion=RPC0)
echo "| run | s/step | weights sent per step | client peak RSS | same image |"
echo "|---|---|---|---|---|"
for round in $(seq "$rounds"); do
  for row in whole cut prefetch; do
    case $row in
      whole) flags=(--rpc-servers "127.0.0.1:$roomy") ;;
      cut) flags=(--rpc-servers "127.0.0.1:$tight" --params-backend diffusion=cpu --max-vram "$budget") ;;
      prefetch) flags=(--rpc-servers "127.0.0.1:$tight" --params-backend diffusion=cpu --max-vram "$budget"
        --stream-layers) ;;
    esac
    /usr/bin/time -f "%M" -o "$out/rss" "$cli" "${gen[@]}" "${flags[@]}" -o "$out/$row.png" \
      >"$out/log" 2>&1 || { echo "| $row | failed: $(tail -1 "$out/log") |"; continue; }
    # Per-step rates from the progress line: the mean of every step after the first.
    rate=$(tr '\r' '\n' <"$out/log" | grep -oE '[0-9.]+s/it' | tr -d 's/it' | tail -n +2 |
      awk '{ s += $1; n++ } END { if (n) printf "%.2f", s / n; else print "-" }')
    sent=$(grep -oE '[0-9.]+ MiB of weights uploaded in [0-9]+ run' "$out/log" |
      awk '{ printf "%.0f MiB", $1 / $6 }')
    [ -n "$sent" ] || sent="0 (resident)"
    [ "$row" = whole ] && cp "$out/whole.png" "$out/reference.png"
    same=$(cmp -s "$out/reference.png" "$out/$row.png" && echo yes || echo NO)
    echo "| $row (round $round) | $rate | $sent | $(awk '{ printf "%.0f MB", $1 / 1024 }' "$out/rss") | $same |"
  done
done
