#!/usr/bin/env bash
# Runs every test binary (and fuzz corpus replay) in each given build dir.
# A binary's exit code: 0 pass, 77 skipped, anything else fail.
# Ends with the line "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
passed=0; failed=0; skipped=0; failures=()
for dir in "$@"; do
  for t in "$dir"/tests/test-*; do
    [ -x "$t" ] || continue
    echo "=== $t"
    start=$(date +%s%N)
    "$t"; rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 )); secs="$((ms/1000)).$(( (ms%1000)/100 ))"
    case $rc in
      0) passed=$((passed+1)); echo "=== PASS $t (${secs}s)";;
      77) skipped=$((skipped+1)); echo "=== SKIP $t (${secs}s)";;
      *) failed=$((failed+1)); failures+=("$t"); echo "=== FAIL $t (rc $rc, ${secs}s)";;
    esac
  done
  for f in "$dir"/fuzz/fuzz-*; do
    [ -x "$f" ] || continue
    name=$(basename "$f")
    corpus="fuzz/corpus/${name#fuzz-}"
    echo "=== $f replay $corpus"
    if "$f" "$corpus"; then passed=$((passed+1)); echo "=== PASS $f";
    else failed=$((failed+1)); failures+=("$f"); echo "=== FAIL $f"; fi
  done
done
for f in "${failures[@]+"${failures[@]}"}"; do echo "failed: $f"; done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
