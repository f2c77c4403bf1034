# ckey build. `make` builds the release library + CLI into build/,
# `make asan` the AddressSanitizer+UBSan build into build-asan/,
# `make test` runs the whole suite (release, then sanitizers).
#
# Knobs:  BLAS=none (default: ckey's own SGEMM, src/cpu/gemm.c) | openblas
#         (Debian's libopenblas-pthread-dev; BLAS_PREFIX=dir with include/ and
#         lib/ of one unpacked elsewhere, see tools/gpu-deps.sh)
#         PNG / JPEG / TIFF = yes|no (default: found by pkg-config: libpng,
#         libjpeg, libtiff-4); without one, reading that format fails with
#         CKEY_ERR_UNSUPPORTED
#         EXR = yes|no (default: found by pkg-config: OpenEXR, Debian's
#         libopenexr-dev 3.1); without it the EXR reader and writer fail with
#         CKEY_ERR_UNSUPPORTED. EXR_SYSROOT=dir: take OpenEXR from a sysroot
#         unpacked by tools/gpu-deps.sh (.deps/root), with an rpath to it
#         DEFLATE = yes|no (default: found by pkg-config, in EXR_SYSROOT if
#         set: libdeflate, Debian's libdeflate-dev); with EXR, PXR24 / ZIP
#         chunks are deflated by it instead of OpenEXR's zlib (same format,
#         ~3x faster at level 6); with PNG, plain 8/16-bit PNGs are inflated
#         by it (src/media/png.c's fast path)
#         FFMPEG = yes|no (default: found by pkg-config: libavformat,
#         libavcodec, libavutil, libswscale; Debian's lib*-dev 5.1); without
#         it the ckey_video_* calls fail with CKEY_ERR_UNSUPPORTED.
#         FFMPEG_PREFIX=dir: take FFmpeg (only) from a prefix built by
#         `tools/gpu-deps.sh --ffmpeg` (.deps/ffroot), with an rpath to it
#         CUDA=yes|no (default: yes when nvcc is on PATH); CUDA_ARCH=90 (H100/H200)
#         CUDA_OPTS: build options of the CUDA code for A/B benchmarks, e.g.
#         -DCK_CUDA_NO_PDL (plain stream order instead of programmatic dependent
#         launch), -DCK_CUDA_LT_TUNE (time cuBLASLt's candidates and print the
#         table for src/cuda/lt-tuned.h); a default build has none

.DEFAULT_GOAL := all

CC      ?= cc
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
BLAS    ?= none
PNG     ?= $(shell pkg-config --exists libpng 2>/dev/null && echo yes || echo no)
JPEG    ?= $(shell pkg-config --exists libjpeg 2>/dev/null && echo yes || echo no)
TIFF    ?= $(shell pkg-config --exists libtiff-4 2>/dev/null && echo yes || echo no)
ifneq ($(EXR_SYSROOT),)
  EXR_PC    := PKG_CONFIG_SYSROOT_DIR=$(abspath $(EXR_SYSROOT)) PKG_CONFIG_LIBDIR=$(abspath $(EXR_SYSROOT))/usr/lib/$(MULTIARCH)/pkgconfig pkg-config
  EXR_RPATH := -Wl,-rpath,$(abspath $(EXR_SYSROOT))/usr/lib/$(MULTIARCH)
else
  EXR_PC    := pkg-config
endif
EXR     ?= $(shell $(EXR_PC) --exists OpenEXR 2>/dev/null && echo yes || echo no)
DEFLATE ?= $(shell $(EXR_PC) --exists libdeflate 2>/dev/null && echo yes || echo no)
FFMPEG_PC := libavformat libavcodec libavutil libswscale
ifneq ($(FFMPEG_PREFIX),)
  FF_PC    := PKG_CONFIG_LIBDIR=$(abspath $(FFMPEG_PREFIX))/lib/pkgconfig pkg-config
  FF_RPATH := -Wl,-rpath,$(abspath $(FFMPEG_PREFIX))/lib
  FFMPEG   ?= yes
else
  FF_PC    := pkg-config
endif
FFMPEG  ?= $(shell $(FF_PC) --exists $(FFMPEG_PC) 2>/dev/null && echo yes || echo no)

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter -Wno-psabi
BASEFLAGS := -std=c11 -D_GNU_SOURCE -Iinclude -Isrc $(WARN) -pthread -fno-strict-aliasing -ffp-contract=fast
LIBS    := -lm -pthread

ifeq ($(BLAS),openblas)
  ifdef BLAS_PREFIX
    BLAS_INC := -I$(BLAS_PREFIX)/include
    BLAS_LIB := -L$(BLAS_PREFIX)/lib -Wl,-rpath,$(abspath $(BLAS_PREFIX)/lib) -lopenblas
  else
    BLAS_INC := -I/usr/include/$(MULTIARCH)/openblas-pthread
    BLAS_LIB := -L/usr/lib/$(MULTIARCH)/openblas-pthread -Wl,-rpath,/usr/lib/$(MULTIARCH)/openblas-pthread -lopenblas
  endif
  BASEFLAGS += -DCK_HAVE_OPENBLAS=1 $(BLAS_INC)
  LIBS += $(BLAS_LIB)
endif
ifeq ($(PNG),yes)
  BASEFLAGS += -DCK_HAVE_PNG=1 $(shell pkg-config --cflags libpng)
  LIBS += $(shell pkg-config --libs libpng)
endif
ifeq ($(JPEG),yes)
  BASEFLAGS += -DCK_HAVE_JPEG=1 $(shell pkg-config --cflags libjpeg)
  LIBS += $(shell pkg-config --libs libjpeg)
endif
ifeq ($(TIFF),yes)
  BASEFLAGS += -DCK_HAVE_TIFF=1 $(shell pkg-config --cflags libtiff-4)
  LIBS += $(shell pkg-config --libs libtiff-4)
endif
# OpenEXR: only the C library (OpenEXRCore) is used; pkg-config's --libs also
# names the C++ ones, which the linker drops with --as-needed.
ifeq ($(EXR),yes)
  BASEFLAGS += -DCK_HAVE_EXR=1 $(shell $(EXR_PC) --cflags OpenEXR)
  LIBS += $(shell $(EXR_PC) --libs OpenEXR) $(EXR_RPATH)
endif
ifeq ($(DEFLATE),yes)
  BASEFLAGS += -DCK_HAVE_LIBDEFLATE=1 $(shell $(EXR_PC) --cflags libdeflate)
  LIBS += $(shell $(EXR_PC) --libs libdeflate)
ifneq ($(EXR),yes)
  LIBS += $(EXR_RPATH)
endif
endif
ifeq ($(FFMPEG),yes)
  BASEFLAGS += -DCK_HAVE_FFMPEG=1 $(shell $(FF_PC) --cflags $(FFMPEG_PC))
  LIBS += $(shell $(FF_PC) --libs $(FFMPEG_PC))
ifneq ($(FF_RPATH),)
  LIBS += $(FF_RPATH)
endif
endif

# CUDA: src/cuda/*.cu through nvcc, linked with the CUDA runtime and cuBLAS.
# Without a GPU or driver at run time the library reports no CUDA device.
NVCC      ?= $(shell command -v nvcc 2>/dev/null)
CUDA      ?= $(if $(NVCC),yes,no)
CUDA_ARCH ?= 90
CU_SRC    :=
# the flags of a build without CUDA (build-nocuda: `make test` links one, so
# the CUDA-less stand-ins in src/cuda/no-cuda.c and backend.c stay complete)
BASEFLAGS_NOCUDA := $(BASEFLAGS)
LIBS_NOCUDA      := $(LIBS)
NO_CU_SRC        :=
ifeq ($(CUDA),yes)
  CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
  CU_SRC    := $(sort $(wildcard src/cuda/*.cu))
  BASEFLAGS += -DCK_HAVE_CUDA=1 -I$(CUDA_HOME)/include
  LIBS      += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcublasLt -lcudart -lstdc++
  NVFLAGS   := -std=c++17 -O3 -Iinclude -Isrc -DCK_HAVE_CUDA=1 $(CUDA_OPTS) \
               -Xcompiler -Wall,-Wextra,-Werror,-Wno-unused-parameter --Werror all-warnings
  NVARCH    := -gencode arch=compute_$(CUDA_ARCH),code=[sm_$(CUDA_ARCH),compute_$(CUDA_ARCH)]
  # wgmma exists only on sm_90a (arch-specific, no PTX forward compatibility):
  # attention-wgmma.cu, refiner-wgmma.cu and linear-gelu-wgmma.cu are built for exactly that;
  # ck_cuda_wgmma_ok() gates them.
  NVARCH_WGMMA := -gencode arch=compute_90a,code=sm_90a
endif

RELFLAGS  := -O3 -g -DNDEBUG
ASANFLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

LIB_SRC  := $(sort $(wildcard src/core/*.c src/ckpt/*.c src/media/*.c src/pixel/*.c src/clip/*.c src/model/*.c src/backend/*.c src/cpu/*.c src/cuda/*.c))
PROG_SRC := $(sort $(wildcard programs/ckey/*.c))
TEST_SRC := $(sort $(wildcard tests/test-*.c))
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz-*.c))
# tests/support/*.c: the tests' shared code, linked into each of them
TEST_SUPPORT := testutil clip cutie-fixture memread-ref
# bench/benchutil.c is the benchmarks' shared code, linked into each of them
BENCH_SRC := $(filter-out bench/benchutil.c,$(sort $(wildcard bench/*.c)))

# Objects depend on a stamp holding the flags, so `make BLAS=...` rebuilds.
FLAGS_ID := $(shell echo '$(CC) $(BASEFLAGS) $(LIBS) $(CUDA_OPTS)' | cksum | cut -d' ' -f1)

# build_tree(dir, flags[, base flags, libs, CUDA sources]: the names of the
# variables, BASEFLAGS, LIBS and CU_SRC when not given[, a tree whose CUDA
# objects to take]: nvcc gets the same flags in every tree and no sanitizer
# reaches device code, so the ASan tree copies the release tree's instead of
# compiling them again)
define build_tree
$(1)/flags-$(FLAGS_ID):
	@mkdir -p $(1) && rm -f $(1)/flags-* && touch $$@
$(1)/obj/%.o: %.c $(1)/flags-$(FLAGS_ID)
	@mkdir -p $$(dir $$@)
	$$(CC) $$($(or $(3),BASEFLAGS)) $(2) -MMD -MP -c $$< -o $$@
ifeq ($(6),)
$(1)/obj/%.cu.o: %.cu $(1)/flags-$(FLAGS_ID)
	@mkdir -p $$(dir $$@)
	$$(NVCC) $$(NVFLAGS) $$(NVARCH) -MMD -MP -c $$< -o $$@
else
$(1)/obj/%.cu.o: $(6)/obj/%.cu.o
	@mkdir -p $$(dir $$@)
	cp $$< $$@
endif
$(1)/obj/src/cuda/attention-wgmma.cu.o: NVARCH = $$(NVARCH_WGMMA)
$(1)/obj/src/cuda/refiner-wgmma.cu.o: NVARCH = $$(NVARCH_WGMMA)
$(1)/obj/src/cuda/linear-gelu-wgmma.cu.o: NVARCH = $$(NVARCH_WGMMA)
$(1)/libckey.a: $$(patsubst %.c,$(1)/obj/%.o,$$(LIB_SRC)) $$(patsubst %.cu,$(1)/obj/%.cu.o,$$($(or $(5),CU_SRC)))
	@rm -f $$@
	ar rcs $$@ $$^
$(1)/ckey: $$(patsubst %.c,$(1)/obj/%.o,$$(PROG_SRC)) $(1)/libckey.a
	$$(CC) $(2) $$^ -o $$@ $$($(or $(4),LIBS))
$(1)/tests/%: $(1)/obj/tests/%.o $$(addprefix $(1)/obj/tests/support/,$$(addsuffix .o,$$(TEST_SUPPORT))) $(1)/libckey.a
	@mkdir -p $$(dir $$@)
	$$(CC) $(2) $$^ -o $$@ $$(LIBS)
# test-cli also checks the CLI's SHA-256 against known vectors
$(1)/tests/test-cli: $(1)/obj/programs/ckey/sha256.o
$(1)/fuzz/%: $(1)/obj/fuzz/%.o $(1)/obj/fuzz/replay.o $(1)/libckey.a
	@mkdir -p $$(dir $$@)
	$$(CC) $(2) $$^ -o $$@ $$(LIBS)
$(1)/bench/%: $(1)/obj/bench/%.o $(1)/obj/bench/benchutil.o $(1)/libckey.a
	@mkdir -p $$(dir $$@)
	$$(CC) $(2) $$^ -o $$@ $$(LIBS)
-include $$(shell find $(1)/obj -name '*.d' 2>/dev/null)
endef

$(eval $(call build_tree,build,$(RELFLAGS)))
$(eval $(call build_tree,build-asan,$(ASANFLAGS),,,,build))
$(eval $(call build_tree,build-nocuda,-O0,BASEFLAGS_NOCUDA,LIBS_NOCUDA,NO_CU_SRC))

TESTS      := $(patsubst tests/%.c,build/tests/%,$(TEST_SRC))
ASAN_TESTS := $(patsubst tests/%.c,build-asan/tests/%,$(TEST_SRC))
FUZZERS    := $(patsubst fuzz/%.c,build/fuzz/%,$(FUZZ_SRC))
ASAN_FUZZERS := $(patsubst fuzz/%.c,build-asan/fuzz/%,$(FUZZ_SRC))
BENCHES    := $(patsubst bench/%.c,build/bench/%,$(BENCH_SRC))

.PHONY: all asan test test-release test-gpu example bench clean
.SECONDARY:

all: build/ckey $(TESTS) $(FUZZERS) $(BENCHES)
asan: build-asan/ckey $(ASAN_TESTS) $(ASAN_FUZZERS)

# The whole suite: every tests/test-*.c and the fuzz corpora, in the release
# build and again under ASan+UBSan. Prints "N passed, N failed" at the end.
# build-nocuda/ckey (unoptimized) checks that a machine without nvcc builds.
# The three trees are built with a job per core (JOBS=1 for a serial build);
# the tests themselves run one binary at a time.
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
test:
	@$(MAKE) --no-print-directory -j$(JOBS) all asan build-nocuda/ckey
	@tools/run-tests.sh build build-asan

# TEST_JOBS=N: N test binaries at once (the GPU host runs the release suite so)
TEST_JOBS ?= 1
test-release: all
	@tools/run-tests.sh -j $(TEST_JOBS) build

# On a machine with a GPU: the CUDA op tests must run (a skip fails here).
test-gpu: build/tests/test-cuda build/tests/test-cuda-cutie build/tests/test-cuda-read build/tests/test-cuda-budget
	@for t in build/tests/test-cuda build/tests/test-cuda-cutie build/tests/test-cuda-read build/tests/test-cuda-budget; do \
	  $$t > build/test-gpu.log 2>&1; rc=$$?; cat build/test-gpu.log; \
	  if [ $$rc -eq 77 ]; then echo "test-gpu: no CUDA device, $$t skipped"; exit 1; fi; \
	  [ $$rc -eq 0 ] || exit $$rc; \
	  if grep -q '^\[ SKIP \]' build/test-gpu.log; then echo "test-gpu: $$t skipped a GPU case"; exit 1; fi; done

# On the CPU with 2 threads, so it prints the same on every machine: README.md
# shows its output (tools/gen-samples.sh; test-cli checks it).
example: build/ckey
	build/ckey run --model tests/fixtures/tiny/tiny.pth --image examples/plate.png \
	    --hint examples/hint.png --out example-out --size 128 --threads 2 --device cpu

bench: build/ckey $(BENCHES)

clean:
	rm -rf build build-asan build-nocuda
