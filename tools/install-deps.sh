#!/usr/bin/env bash
# Install the Debian packages ckey's build and tests need (uses sudo when not root).
#   build-essential, pkg-config : compiler, make
#   (no BLAS: ckey's own reentrant SGEMM is the default; `make BLAS=openblas`
#    links Debian's libopenblas-pthread-dev instead, see docs/design.md)
#   libpng-dev                  : PNG plates, hints and mattes
#   libjpeg-dev                 : JPEG plates and hints (libjpeg-turbo)
#   libtiff-dev                 : TIFF plates and hints (8/16-bit, float)
#   libopenexr-dev              : OpenEXR plates/hints and EXR mattes (C API, OpenEXRCore)
#   libdeflate-dev              : deflates the EXR passes' PXR24 / ZIP chunks (~3x faster
#                                 than OpenEXR's zlib; optional, `make DEFLATE=no`)
#   libavformat-dev libavcodec-dev libavutil-dev libswscale-dev
#                               : FFmpeg, for video in (H.264, HEVC, ProRes, ... in mov/mp4/mkv)
#                                 and out (ProRes 4444 with alpha, H.264 via libx264);
#                                 optional like the image libraries (`make FFMPEG=no`)
#   slurmctld slurmd slurm-client munge
#                               : a throw-away single-node Slurm cluster for tests/test-slurm.c
#                                 and bench/farm-chunks.sh (tools/farm/local-slurm.sh; needs root)
#   python3-venv                : the virtual environment tests/test-openjd.c installs
#                                 openjd-cli into (from PyPI)
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends \
    build-essential pkg-config libpng-dev libjpeg-dev libtiff-dev libopenexr-dev libdeflate-dev \
    libavformat-dev libavcodec-dev libavutil-dev libswscale-dev \
    slurmctld slurmd slurm-client munge python3-venv
