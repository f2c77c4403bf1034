#!/usr/bin/env bash
# End-to-end `ckey key` throughput on a synthetic clip (not a test):
#
#   bench/key_clip.sh [FRAMES] [WxH] [ckey key options ...]
#
# Writes the full-size synthetic weights as a checkpoint (bench-forward
# --save-model), a synthetic green-screen clip of FRAMES PNG frames
# (bench/make_clip.py; default 24 frames of 3840 x 2160), then keys it with
# `build/ckey key` into the four passes and prints ckey's summary line: frames
# per second end to end (read, network, post-process, write, overlapped on
# three threads) and model only. Needs build/ckey and build/bench/bench-forward
# (`make bench`) with OpenEXR, and python3 with numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
frames=${1:-24}
size=${2:-3840x2160}
shift $(( $# < 2 ? $# : 2 ))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build/bench/bench-forward --save-model "$work/weights.safetensors"
python3 bench/make_clip.py "$work/clip" --frames "$frames" --size "$size"
build/ckey key "$work/clip" --model "$work/weights.safetensors" "$@" 2>&1 | tail -n 2
