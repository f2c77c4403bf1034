#!/usr/bin/env bash
# End-to-end `ckey key` throughput on synthetic clips, stage by stage (not a
# test):
#
#   bench/key_clip.sh [FRAMES] [WxH[,WxH...]] [--formats F[,F...]] [--dir DIR]
#                     [--forward-runs N] [ckey key options ...]
#
# Writes the full-size synthetic weights as a checkpoint (bench-forward
# --save-model), then for each plate size (default 3840x2160) and plate
# format (default png8,png16,exr: 8-bit PNG, 16-bit PNG, HALF EXR plates;
# h264, prores: the same plates as one H.264 .mp4 / ProRes 422 HQ .mov in
# Input/; build/bench/make-synth-clip) a clip of FRAMES frames (default
# 24), and keys it with `build/ckey key --json` into the four passes
# (defaults: three PXR24 EXRs and the Comp PNG; `--video-out both` adds the
# ProRes 4444 and H.264 videos). For each clip it prints the end-to-end rate,
# ckey's model-only rate, every stage's busy seconds per frame (summed over
# the threads that run it and over the groups: "encode" holds the writers'
# EXR / PNG compression and ProRes coding and the ordered stage's H.264
# encoding; "read" a video plate's decoding), each thread group's use (busy
# / (wall x threads)) and busy seconds per frame (the "ordered" group: one
# frame at a time, in frame order, the ProRes packets' muxing and the H.264
# encoder's calls, on the writers' threads, so the writers' figures include
# it), the model threads' waits for an
# input and for a free output slot, the stage that bounds the run, with its
# group (docs/performance.md, "Where a clip's time goes") and the frame path
# that ran, with the reason. Before
# the clips it runs build/bench/bench-forward at
# the same --size / --device / --precision, so the network-only rate is
# measured in the same run. The options after the sizes go to `ckey key`
# (--device, --size, --precision, --readers, --writers, --frame-path, ...);
# --formats, --dir (where the clips and passes go; default a temporary
# directory under $TMPDIR) and --forward-runs (default 10) are this
# script's. Needs build/ckey, build/bench/bench-forward and
# build/bench/make-synth-clip (`make bench`) with OpenEXR (and FFmpeg for
# h264 / prores / --video-out), and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
frames=24
sizes=3840x2160
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then frames=$1; shift; fi
if [[ $# -gt 0 && $1 =~ ^[0-9]+x[0-9]+(,[0-9]+x[0-9]+)*$ ]]; then sizes=$1; shift; fi
formats=png8,png16,exr
dir=
fwd_runs=10
S=2048
device=
precision=
key_args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --formats) formats=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --forward-runs) fwd_runs=$2; shift 2 ;;
    --size) S=$2; key_args+=("$1" "$2"); shift 2 ;;
    --device) device=$2; key_args+=("$1" "$2"); shift 2 ;;
    --precision) precision=$2; key_args+=("$1" "$2"); shift 2 ;;
    *) key_args+=("$1"); shift ;;
  esac
done
IFS=, read -r -a format_list <<< "$formats"
for fmt in "${format_list[@]}"; do
  case $fmt in
    png8|png16|exr|h264|prores) ;;
    *) echo "key_clip.sh: unknown plate format $fmt (png8, png16, exr, h264, prores)" >&2; exit 2 ;;
  esac
done
for b in build/ckey build/bench/bench-forward build/bench/make-synth-clip; do
  [[ -x $b ]] || { echo "key_clip.sh: $b is not built (make bench)" >&2; exit 1; }
done
if [[ -n $dir ]]; then
  mkdir -p "$dir"
  work=$(mktemp -d "$dir/key-clip.XXXXXX")
else
  work=$(mktemp -d)
fi
trap 'rm -rf "$work"' EXIT

fwd_args=(--size "$S" --runs "$fwd_runs")
[[ -n $device ]] && fwd_args+=(--device "$device")
[[ -n $precision ]] && fwd_args+=(--precision "$precision")
build/bench/bench-forward --save-model "$work/weights.safetensors" >/dev/null
echo "network only (build/bench/bench-forward ${fwd_args[*]}):"
build/bench/bench-forward "${fwd_args[@]}" 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    dev = r.get("device_mean_s") or 0
    print("  S = %d, %s %s: %.2f ms a frame (%.2f fps), device time %.2f ms (%.2f fps)" % (
        r["size"], r["device"], r["precision"], 1e3 * r["mean_s"], 1 / r["mean_s"],
        1e3 * dev, 1 / dev if dev > 0 else 0))
'

IFS=, read -r -a size_list <<< "$sizes"
for wh in "${size_list[@]}"; do
  w=${wh%x*} h=${wh#*x}
  # the clips of this size at once (one process each), then keyed one after another
  pids=()
  for fmt in "${format_list[@]}"; do
    build/bench/make-synth-clip "$work/clip-$wh-$fmt" "$frames" "$w" "$h" "$fmt" >/dev/null &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  for fmt in "${format_list[@]}"; do
    clip=$work/clip-$wh-$fmt
    build/ckey key "$clip" --model "$work/weights.safetensors" --json "${key_args[@]}" \
      2>"$work/stderr" >"$work/events" || { cat "$work/stderr" >&2; exit 1; }
    python3 - "$wh" "$fmt" "$work/events" <<'EOF'
import json, sys
wh, fmt, path = sys.argv[1:4]
done = None
for line in open(path):
    e = json.loads(line)
    if e.get("event") == "done":
        done = e
if done is None:
    sys.exit("key_clip.sh: no done event")
n = max(done["keyed"], 1)
print("%s %s plates: %d frames in %.2f s: %.2f fps end to end, %.2f fps model only, bound by %s (%s %.0f%% busy)" % (
    wh, fmt, done["keyed"], done["seconds"], done["fps"], done["model_fps"], done["bound"],
    done["bound_group"], 100 * done["use"][done["bound_group"]]))
print("  busy s/frame: " + ", ".join("%s %.4f" % (k, v / n) for k, v in done["stages"].items()))
print("  group busy s/frame (the writers' with their ordered part): " + ", ".join("%s %.4f" % (g, u * done["seconds"] * done["threads"][g] / n)
                                          for g, u in done["use"].items()))
print("  use: " + ", ".join("%s %.0f%% of %d" % (g, 100 * u, done["threads"][g]) for g, u in done["use"].items()) +
      "; the network waited %.3f s for inputs, %.3f s for free output slots; writers waited %.3f s for their turn; CPU %.2f s a frame (%.1f cores busy); peak RSS %.0f MiB" % (
      done["wait_input_seconds"], done["wait_output_seconds"], done["wait_turn_seconds"],
      done["cpu_seconds"] / n, done["cpu_seconds"] / max(done["seconds"], 1e-9), done["peak_rss_bytes"] / 2**20))
print("  frame path: %s (%s)" % (done.get("frame_path", "?"), done.get("frame_path_reason", "")))
EOF
    rm -rf "$clip"
  done
done
