# Shared by the shell tests (source it): a scratch folder $work, background processes in
# $pids killed at exit, fail() to count a failed check, and finish() to end the script.
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  [ -n "${KEEP_TEST_FILES:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# finish MESSAGE: prints MESSAGE when every check passed; exits 1 otherwise.
finish() {
  if [ "$failures" -gt 0 ]; then
    echo "$failures failure(s)"
    exit 1
  fi
  echo "$1"
  exit 0
}
