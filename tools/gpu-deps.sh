#!/usr/bin/env bash
# Unpack the Debian packages the build links against into .deps/ so that the
# tree builds on a machine without apt or a package registry (a GPU host, for
# tools/gpu-ab.sh). Run it where apt works. Parts:
#   .deps/include, .deps/lib  OpenBLAS: `make BLAS=openblas BLAS_PREFIX=.deps`
#   .deps/root                OpenEXR, Imath, libdeflate (headers, libraries,
#                             .pc files) as a sysroot: `make EXR_SYSROOT=.deps/root`
#   .deps/ffroot              (`tools/gpu-deps.sh --ffmpeg`, alone) FFmpeg for
#                             src/media/video.c: see ffmpeg() below
# Copy .deps along with the tree to the machine that builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
arch=$(gcc -print-multiarch)

# --ffmpeg: .deps/ffroot, a small FFmpeg for the video paths (src/media/video.c)
# on a host without FFmpeg's development libraries, where Debian's own libav*
# with their runtime closure (~140 MiB) are too big to carry. It is Debian
# bookworm's FFmpeg source (the version of libavcodec-dev here: `apt-get source`,
# which needs a deb-src line for bookworm and bookworm-security) built with only
# what ckey and its tests use, plus Debian's libx264 (library and headers):
# lib/ (libavformat, libavcodec, libavutil, libswscale, libx264, each finding
# the others through an rpath of $ORIGIN), include/, lib/pkgconfig/ (relocatable:
# prefix=${pcfiledir}/../..). The build takes it with FFMPEG_PREFIX, which puts
# an rpath to its lib/ into the programs, so no LD_LIBRARY_PATH is needed:
#   make EXR_SYSROOT=.deps/root FFMPEG_PREFIX=.deps/ffroot -j16 build/ckey
# (FFMPEG_PREFIX implies FFMPEG=yes.) It needs only libc, libm and libz at run time.
ffmpeg() {
    # what video.c reads and writes, and what tests/test-video.c makes with
    # libavcodec directly (FFV1 and rawvideo in Matroska, mov and NUT, through
    # the file protocol); the mov demuxer and muxer also give mp4
    local decoders=h264,hevc,prores,ffv1,rawvideo
    local encoders=prores_ks,libx264,ffv1,rawvideo
    local parsers=h264,hevc
    local demuxers=mov,matroska,nut
    local muxers=mov,mp4,matroska,nut
    local bsfs=null # libavcodec's decoders run packets through it
    local ver root tmp
    ver=$(apt-cache policy libavcodec-dev | awk '/Candidate:/ {print $2}')
    if ! grep -qx "Version: $ver" <<<"$(apt-cache showsrc ffmpeg 2>/dev/null)"; then
        echo "gpu-deps: apt has no source of ffmpeg $ver: add a deb-src line for bookworm and" >&2
        echo "bookworm-security (e.g. /etc/apt/sources.list.d/deb-src.sources, Types: deb-src)" >&2
        echo "and run apt-get update" >&2
        exit 1
    fi
    root=$PWD/.deps/ffroot
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get source -q ffmpeg="$ver" >/dev/null &&
        apt-get download libx264-164 libx264-dev nasm >/dev/null)
    for d in "$tmp"/*.deb; do dpkg -x "$d" "$tmp/x"; done
    rm -rf "$root" && mkdir -p "$root/include" "$root/lib/pkgconfig"
    cp "$tmp/x/usr/include/"x264*.h "$root/include/"
    cp -P "$tmp/x/usr/lib/$arch/"libx264.so* "$root/lib/"
    sed -e 's|^prefix=.*|prefix=${pcfiledir}/../..|' -e "s|/usr/lib/$arch|\${prefix}/lib|" \
        "$tmp/x/usr/lib/$arch/pkgconfig/x264.pc" > "$root/lib/pkgconfig/x264.pc"
    # $ORIGIN reaches the linker through configure's eval, make's eval and
    # recipe expansions and a shell
    (cd "$tmp"/ffmpeg-*/ && PKG_CONFIG_LIBDIR="$root/lib/pkgconfig" ./configure \
        --prefix="$root" --enable-gpl --enable-libx264 --enable-shared --disable-static \
        --disable-programs --disable-doc --disable-debug --disable-everything --disable-autodetect \
        --enable-pthreads --enable-zlib --disable-avdevice --disable-avfilter --disable-swresample \
        --disable-postproc --disable-network --enable-swscale --enable-protocol=file \
        --enable-decoder=$decoders --enable-encoder=$encoders --enable-parser=$parsers \
        --enable-demuxer=$demuxers --enable-muxer=$muxers --enable-bsf=$bsfs \
        --x86asmexe="$tmp/x/usr/bin/nasm" --extra-ldsoflags='-Wl,-rpath,\\\$\$\$\$ORIGIN' \
        --extra-version="ckey-minimal" >"$tmp/configure.log" 2>&1 ||
        { tail -30 "$tmp/configure.log" >&2; exit 1; }
    make -j"$(nproc)" >"$tmp/make.log" 2>&1 || { tail -30 "$tmp/make.log" >&2; exit 1; }
    make install >/dev/null)
    rm -rf "$root/share"
    sed -i -e "s|$root|\${pcfiledir}/../..|g" "$root"/lib/pkgconfig/lib*.pc
    rm -rf "$tmp"
    du -sh "$root"
}
if [ "${1-}" = --ffmpeg ]; then
    ffmpeg
    exit
elif [ $# -gt 0 ]; then
    echo "usage: tools/gpu-deps.sh [--ffmpeg]" >&2
    exit 2
fi

tmp=$(mktemp -d)
(cd "$tmp" && apt-get download libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0 \
    libopenexr-dev libopenexr-3-1-30 libimath-dev libimath-3-1-29 libdeflate-dev libdeflate0 >/dev/null)
rm -rf .deps/include .deps/lib .deps/root && mkdir -p .deps/include .deps/lib
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
