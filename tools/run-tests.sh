#!/usr/bin/env bash
# Runs every test binary (and fuzz corpus replay) in each given build dir.
# A binary's exit code: 0 pass, 77 skipped, anything else fail.
# Ends with the line "N passed, N failed, N skipped".
# -j N: N binaries at once (each one's output is printed whole when it ends;
# the default, 1, runs them one after another).
set -u
cd "$(dirname "$0")/.."
jobs=1
if [ "${1:-}" = "-j" ]; then jobs=$2; shift 2; fi
case $jobs in ''|*[!0-9]*|0) echo "run-tests.sh: -j wants a positive number" >&2; exit 2;; esac
passed=0; failed=0; skipped=0; failures=()
work=$(mktemp -d) || exit 2
trap 'rm -rf "$work"' EXIT

# one entry: "test BINARY" or "fuzz BINARY CORPUS"; writes $work/N.out and $work/N.rc
run_one() {
  local n=$1 kind=$2 bin=$3 corpus=${4:-}
  local start ms rc
  start=$(date +%s%N)
  if [ "$kind" = test ]; then "$bin" > "$work/$n.out" 2>&1; rc=$?
  else "$bin" "$corpus" > "$work/$n.out" 2>&1; rc=$?; fi
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  echo "$rc $((ms/1000)).$(( (ms%1000)/100 ))" > "$work/$n.rc"
}

entries=()
for dir in "$@"; do
  for t in "$dir"/tests/test-*; do
    [ -x "$t" ] && entries+=("test $t")
  done
  for f in "$dir"/fuzz/fuzz-*; do
    [ -x "$f" ] || continue
    name=$(basename "$f")
    entries+=("fuzz $f fuzz/corpus/${name#fuzz-}")
  done
done

# the entry's header and output (unless printed already: $2 = shown), then its verdict
report() {
  local n=$1 kind bin corpus rc secs
  read -r kind bin corpus <<< "${entries[$n]}"
  if [ "${2:-}" != shown ]; then
    if [ "$kind" = test ]; then echo "=== $bin"; else echo "=== $bin replay $corpus"; fi
    cat "$work/$n.out"
  fi
  read -r rc secs < "$work/$n.rc"
  if [ "$kind" = fuzz ]; then
    if [ "$rc" -eq 0 ]; then passed=$((passed+1)); echo "=== PASS $bin";
    else failed=$((failed+1)); failures+=("$bin"); echo "=== FAIL $bin"; fi
    return
  fi
  case $rc in
    0) passed=$((passed+1)); echo "=== PASS $bin (${secs}s)";;
    77) skipped=$((skipped+1)); echo "=== SKIP $bin (${secs}s)";;
    *) failed=$((failed+1)); failures+=("$bin"); echo "=== FAIL $bin (rc $rc, ${secs}s)";;
  esac
}

if [ "$jobs" -eq 1 ]; then
  # one at a time, the output as it comes (a run cut short keeps what it printed)
  for n in "${!entries[@]}"; do
    read -r kind bin corpus <<< "${entries[$n]}"
    if [ "$kind" = test ]; then
      echo "=== $bin"
      start=$(date +%s%N)
      "$bin"; rc=$?
      ms=$(( ($(date +%s%N) - start) / 1000000 ))
      echo "$rc $((ms/1000)).$(( (ms%1000)/100 ))" > "$work/$n.rc"
    else
      echo "=== $bin replay $corpus"
      "$bin" "$corpus"; echo "$? 0" > "$work/$n.rc"
    fi
    report "$n" shown
  done
else
  running=0
  for n in "${!entries[@]}"; do
    # shellcheck disable=SC2086
    run_one "$n" ${entries[$n]} &
    running=$((running+1))
    if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running-1)); fi
  done
  wait
  for n in "${!entries[@]}"; do report "$n"; done
fi
for f in "${failures[@]+"${failures[@]}"}"; do echo "failed: $f"; done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
