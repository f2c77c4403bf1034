#!/usr/bin/env bash
# Unpack the Debian packages the build links against into .deps/ so that the
# tree builds on a machine without apt or a package registry (a GPU host, for
# tools/gpu-ab.sh). Run it where apt works. Two parts:
#   .deps/include, .deps/lib  OpenBLAS: `make BLAS=openblas BLAS_PREFIX=.deps`
#   .deps/root                OpenEXR, Imath, libdeflate (headers, libraries,
#                             .pc files) as a sysroot: `make EXR_SYSROOT=.deps/root`
# Copy .deps along with the tree to the machine that builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
arch=$(gcc -print-multiarch)
tmp=$(mktemp -d)
(cd "$tmp" && apt-get download libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0 \
    libopenexr-dev libopenexr-3-1-30 libimath-dev libimath-3-1-29 libdeflate-dev libdeflate0 >/dev/null)
rm -rf .deps && mkdir -p .deps/include .deps/lib
for d in "$tmp"/*.deb; do dpkg -x "$d" "$tmp/root"; done
cp "$tmp/root/usr/include/$arch/openblas-pthread/"*.h .deps/include/
cp -P "$tmp/root/usr/lib/$arch/openblas-pthread/"libopenblas*.so* .deps/lib/
cp -P "$tmp/root/usr/lib/$arch/"libgfortran.so.5* "$tmp/root/usr/lib/$arch/"libquadmath.so.0* .deps/lib/
mkdir -p .deps/root/usr
cp -a "$tmp/root/usr/include" .deps/root/usr/
mkdir -p ".deps/root/usr/lib/$arch"
cp -a "$tmp/root/usr/lib/$arch/"lib{OpenEXR,OpenEXRUtil,OpenEXRCore,Iex,IlmThread,Imath}-3_1.so* ".deps/root/usr/lib/$arch/"
cp -a "$tmp/root/usr/lib/$arch/"libdeflate.so* ".deps/root/usr/lib/$arch/"
cp -a "$tmp/root/usr/lib/$arch/pkgconfig" ".deps/root/usr/lib/$arch/"
rm -rf "$tmp"
du -sh .deps
