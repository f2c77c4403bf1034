#!/usr/bin/env bash
# Unpack the Debian packages the build links against into .deps/ (include/,
# lib/) so the build can run on a machine with no package registry (the GPU
# machine): `make BLAS_PREFIX=.deps`. Run here, where apt works.
set -euo pipefail
cd "$(dirname "$0")/.."
arch=$(gcc -print-multiarch)
tmp=$(mktemp -d)
(cd "$tmp" && apt-get download libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0 >/dev/null)
rm -rf .deps && mkdir -p .deps/include .deps/lib
for d in "$tmp"/*.deb; do dpkg -x "$d" "$tmp/root"; done
cp "$tmp/root/usr/include/$arch/openblas-pthread/"*.h .deps/include/
cp -P "$tmp/root/usr/lib/$arch/openblas-pthread/"libopenblas*.so* .deps/lib/
cp -P "$tmp/root/usr/lib/$arch/"libgfortran.so.5* "$tmp/root/usr/lib/$arch/"libquadmath.so.0* .deps/lib/
rm -rf "$tmp"
du -sh .deps
