#!/usr/bin/env bash
# A clip keyed as N chunks on a local Slurm cluster against one task (not a
# test): what splitting costs. Each row submits the same generated clip with
# `ckey farm slurm --chunk` and reads every task's `ckey key --json` "done"
# event (setup_seconds: model load + session; seconds: the keying) and its
# process times (bash's `time` around ckey). Tasks run one at a time (the
# cluster has one fake GPU and each task takes it), so each task's times are
# its own, not shared with another task.
#
#   bench/farm-chunks.sh [FRAMES [WxH [TASK_COUNTS ...]]]
#       defaults: 48 frames of 320x180, 1 2 4 8 tasks
#   CKEY_MODEL=... KEY_ARGS="--size 64 --threads 1 --device cpu" to change the
#   keying (default: the tiny test model, S = 64, one CPU thread)
#
# Needs build/ckey and build/bench/make-synth-clip (make bench), root, and
# Debian's slurmctld, slurmd, slurm-client and munge (tools/farm/local-slurm.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
frames=${1:-48}
size=${2:-320x180}
shift $(( $# < 2 ? $# : 2 ))
counts=${*:-1 2 4 8}
model=${CKEY_MODEL:-$root/tests/fixtures/tiny/tiny.pth}
key_args=${KEY_ARGS:---size 64 --threads 1 --device cpu}
[ -x build/ckey ] && [ -x build/bench/make-synth-clip ] || { echo "farm-chunks: make bench first" >&2; exit 1; }

work=$(mktemp -d /tmp/ckey-farm-bench-XXXXXX)
chmod 755 "$work"
trap 'tools/farm/local-slurm.sh stop "$work/cluster" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
tools/farm/local-slurm.sh start "$work/cluster" 1 >/dev/null
# shellcheck disable=SC1091
source "$work/cluster/env"
build/bench/make-synth-clip "$work/clip" "$frames" "${size%x*}" "${size#*x}" >/dev/null

# ckey under bash's `time`, for each task's process times
cat > "$work/ckey-timed" <<WRAP
#!/bin/bash
TIMEFORMAT='process real %R user %U sys %S'
time '$root/build/ckey' "\$@"
WRAP
chmod +x "$work/ckey-timed"

# the first value of "key":number in a line
field() { grep -o "\"$1\":[0-9.e+-]*" <<< "$2" | head -n 1 | cut -d: -f2; }

echo "ckey farm-chunks: $frames frames of $size, $(basename "$model") ($key_args), one task at a time on $(nproc) cores"
# a warm-up run outside the table: the first row does not pay for cold caches
# shellcheck disable=SC2086
build/ckey key "$work/clip" --out "$work/warm-up" --model "$model" $key_args >/dev/null 2>&1
printf '%5s %6s | %9s %9s | %9s %9s | %9s %9s %9s\n' "" "" "start-up" "" "keying" "" "process" "" ""
printf '%5s %6s | %9s %9s | %9s %9s | %9s %9s %9s\n' tasks frames "per task" "all" "all" "model" \
  "wall" "cpu" "rest/task"
first_out=""
for n in $counts; do
  chunk=$(( (frames + n - 1) / n ))
  out=$work/out-$n
  logs=$work/logs-$n
  # shellcheck disable=SC2086
  submitted=$(build/ckey farm slurm "$work/clip" --out "$out" --chunk "$chunk" --video-out none \
    --logs "$logs" --ckey "$work/ckey-timed" --submit -- --model "$model" $key_args --json)
  encode=$(sed -n 's/.*encode job \([0-9]*\).*/\1/p' <<< "$submitted")
  state=""
  for _ in $(seq 3000); do
    state=$(scontrol show job -o "$encode" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2 || true)
    case $state in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break;; esac
    sleep 0.2
  done
  [ "$state" = COMPLETED ] || { echo "farm-chunks: encode job $encode: $state" >&2; cat "$logs"/* >&2; exit 1; }
  for log in "$logs"/key-*.log; do
    done_line=$(grep '"event":"done"' "$log")
    read -r _ _ r _ u _ s <<< "$(grep '^process real' "$log")"
    echo "$(field setup_seconds "$done_line") $(field seconds "$done_line") $(field model_seconds "$done_line") $r $u $s"
  done | awk -v chunk="$chunk" '
    { n++; setup += $1; keying += $2; model += $3; wall += $4; cpu += $5 + $6 }
    END { printf "%5d %6d | %9.4f %9.3f | %9.3f %9.3f | %9.3f %9.3f %9.3f\n", n, chunk, setup / n,
                 setup, keying, model, wall, cpu, (wall - setup - keying) / n }'
  if [ -z "$first_out" ]; then
    first_out=$out
  else
    diff -r "$first_out" "$out" >/dev/null || { echo "farm-chunks: $out differs from $first_out" >&2; exit 1; }
  fi
done
echo "Seconds, summed over the tasks. start-up: model load + session (each task's --json setup_seconds);"
echo "keying: the run after it (read, key, post-process, write; --json seconds); model: its time in the"
echo "network; process: the whole ckey process (bash's time); rest/task: its wall time beyond start-up and"
echo "keying (starting the program, listing the clip, exiting). Every row's passes are byte for byte the"
echo "first row's."
