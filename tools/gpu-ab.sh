#!/usr/bin/env bash
# A/B runs of git refs (branches, commits) against the checked-out tree, on a
# machine with a GPU that gets a copy of the tree but has no git: the refs
# travel as overlays of the files they change.
#
#   tools/gpu-ab.sh prepare REF...     (in the git checkout) writes
#                                      .ab/<name>/: the files that differ
#                                      between HEAD and REF, as REF has them,
#                                      and .ab/<name>.deleted; .ab/ is
#                                      git-ignored: carry it (with .deps)
#   tools/gpu-ab.sh run [options]      (in that copy, where the GPU is) builds
#                                      the tree and each overlay (a copy of the
#                                      tree under /tmp/ab), runs the tests asked
#                                      for in each, then bench-forward in
#                                      interleaved rounds, and prints each one's
#                                      device_mean_s a round
#     --test FILTER    build/tests/test-cuda FILTER in each tree (logs in /tmp/ab-logs,
#                      all of them in $OUT/ab-tests.log when $OUT is set)
#     --size S --runs R --rounds K    bench-forward's size and runs, rounds (2048, 20, 2)
#     --off TREE:LIST  an extra bench entry: tree TREE (HEAD or an overlay's name)
#                      with bench-forward --cuda-off LIST (ckey_debug.h); may be repeated
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-}
shift || true
case "$cmd" in
prepare)
    [ $# -gt 0 ] || { echo "usage: tools/gpu-ab.sh prepare REF..." >&2; exit 2; }
    rm -rf .ab && mkdir -p .ab
    for ref in "$@"; do
        name=$(echo "$ref" | tr '/:' '__')
        mkdir -p ".ab/$name"
        git diff --no-renames --name-only --diff-filter=AMR HEAD "$ref" | while read -r f; do
            mkdir -p ".ab/$name/$(dirname "$f")"
            git show "$ref:$f" > ".ab/$name/$f"
        done
        git diff --no-renames --name-only --diff-filter=D HEAD "$ref" > ".ab/$name.deleted"
        echo "$name: $(git diff --no-renames --name-only HEAD "$ref" | wc -l) files differ ($(git rev-parse --short "$ref"))"
    done
    du -sh .ab
    ;;
run)
    test_filter="" size=2048 runs=20 rounds=2 envs=()
    while [ $# -gt 0 ]; do
        case "$1" in
        --test) test_filter=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --off) envs+=("$2"); shift 2 ;;
        *) echo "gpu-ab: unknown option $1" >&2; exit 2 ;;
        esac
    done
    root=$PWD
    logs=/tmp/ab-logs # build and test logs; the tests' also gathered into $OUT/ab-tests.log
    mkdir -p "$logs"
    build="make EXR_SYSROOT=$root/.deps/root -j$(nproc) build/tests/test-cuda build/bench/bench-forward"
    trees=("$root")
    names=("HEAD")
    for d in .ab/*/; do
        [ -d "$d" ] || continue
        name=$(basename "$d")
        t=/tmp/ab/$name
        rm -rf "$t" && mkdir -p "$t"
        tar -C "$root" --exclude=./build --exclude=./build-asan --exclude=./build-nocuda --exclude=./example-out \
            --exclude=./.ab --exclude=./.git --exclude=./.deps -cf - . | tar -C "$t" -xf -
        cp -r "$d." "$t/"
        while read -r f; do [ -n "$f" ] && rm -f "$t/$f"; done < ".ab/$name.deleted"
        ln -sfn "$root/.deps" "$t/.deps"
        trees+=("$t")
        names+=("$name")
    done
    pids=()
    for i in "${!trees[@]}"; do
        (cd "${trees[$i]}" && $build > "$logs/ab-build-${names[$i]}.log" 2>&1) &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || { echo "gpu-ab: ${names[$i]} does not build (see ab-build-${names[$i]}.log)"; tail -20 "$logs/ab-build-${names[$i]}.log"; exit 1; }
    done
    if [ -n "$test_filter" ]; then
        for i in "${!trees[@]}"; do
            r=0
            (cd "${trees[$i]}" && build/tests/test-cuda "$test_filter" > "$logs/ab-test-${names[$i]}.log" 2>&1) || r=$?
            echo "test $test_filter ${names[$i]}: exit $r, $(tail -1 "$logs/ab-test-${names[$i]}.log")"
            if [ -n "${OUT:-}" ]; then
                echo "==== ${names[$i]}" >> "$OUT/ab-tests.log"
                cat "$logs/ab-test-${names[$i]}.log" >> "$OUT/ab-tests.log"
            fi
        done
    fi
    bench="build/bench/bench-forward --device cuda --size $size --runs $runs"
    mean() { grep -o '"device_mean_s":[0-9.]*' | cut -d: -f2; }
    for r in $(seq 1 "$rounds"); do
        for i in "${!trees[@]}"; do
            echo "round $r ${names[$i]}: $(cd "${trees[$i]}" && $bench 2>/dev/null | mean)"
        done
        for e in ${envs[@]+"${envs[@]}"}; do
            tn=${e%%:*} ev=${e#*:} td=$root
            [ "$tn" = HEAD ] || td=/tmp/ab/$tn
            echo "round $r $tn-$ev: $(cd "$td" && $bench --cuda-off "$ev" 2>/dev/null | mean)"
        done
    done
    ;;
*)
    echo "usage: tools/gpu-ab.sh prepare REF... | run [--test FILTER] [--size S] [--runs R] [--rounds K] [--off TREE:LIST]" >&2
    exit 2
    ;;
esac
