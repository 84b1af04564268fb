# Sourced by the bench scripts: one sd-cli generation timed as a whole process.
#
#   cli_run CLI OUT_DIR NAME ARGS...
#
# writes OUT_DIR/NAME.png and prints "s_per_step decode_s wall_s peak_gb first_step_s":
# the median of the sampling steps after the first (which reads the weights), the VAE
# decode, the whole process and its peak RSS, and the first step. A failed run prints its
# log's tail and exits the calling script.
cli_run() {
  local cli=$1 out=$2 name=$3
  shift 3
  /usr/bin/time -f "%M %e" -o "$out/time" "$cli" -o "$out/$name.png" "$@" >"$out/log" 2>&1 || {
    echo "run failed: $cli $*" >&2
    tail -5 "$out/log" >&2
    exit 1
  }
  local steps rate first decode kb wall
  # Per-step seconds in the order the progress bar printed them (s/it, or 1 / it/s).
  steps=$(tr '\r' '\n' <"$out/log" | grep -oE '[0-9.]+(s/it|it/s)' |
    awk '/s\/it/ { sub("s/it", ""); print $0 + 0; next } { sub("it/s", ""); print 1 / $0 }')
  first=$(echo "$steps" | head -1)
  rate=$(echo "$steps" | tail -n +2 | sort -g |
    awk '{ v[NR] = $1 } END { printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  decode=$(grep -oE 'decoding completed, taking [0-9.]+s' "$out/log" | grep -oE '[0-9.]+' | tail -1)
  read -r kb wall <"$out/time"
  awk -v kb="$kb" -v r="$rate" -v d="$decode" -v w="$wall" -v f="$first" \
    'BEGIN { printf "%s %s %.1f %.2f %.2f\n", r, d, w, kb / 1e6, f }'
}
