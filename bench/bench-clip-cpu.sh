#!/usr/bin/env bash
# The CPU side of keying a clip, before and after (not a test):
#
#   bench/bench-clip-cpu.sh [--before REF] [bench-clip-cpu options ...]
#
# Runs build/bench/bench-clip-cpu (make bench) with the options given. With
# --before REF it first builds libckey at git ref REF (from `git archive`, in
# a temporary directory, CUDA=no) and the same bench/bench-clip-cpu.c against
# it, and runs that on the same clips first, so the two outputs compare an
# earlier version with this one on one machine. The clips are kept in the
# --dir directory (default /tmp/ckey-bench-clip) between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
before=""
if [ "${1:-}" = "--before" ]; then
  before=${2:?--before needs a git ref}
  shift 2
fi
[ -x build/bench/bench-clip-cpu ] || { echo "bench-clip-cpu.sh: make bench first" >&2; exit 1; }
if [ -n "$before" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  git archive "$before" | tar -x -C "$work"
  make -C "$work" CUDA=no -j"$(nproc)" build/libckey.a >/dev/null
  libs="-lm -pthread"
  for pc in libpng libjpeg libtiff-4 OpenEXR libdeflate libavformat libavcodec libavutil libswscale; do
    if pkg-config --exists "$pc"; then libs="$libs $(pkg-config --libs "$pc")"; fi
  done
  # shellcheck disable=SC2086
  cc -std=c11 -D_GNU_SOURCE -O3 -I"$work/include" -I"$work/src" bench/bench-clip-cpu.c "$work/build/libckey.a" \
     -o "$work/bench-clip-cpu" $libs
  echo "== $before ($(git rev-parse --short "$before"))"
  "$work/bench-clip-cpu" "$@"
  echo "== this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', with changes'))"
fi
build/bench/bench-clip-cpu "$@"
