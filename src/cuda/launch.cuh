// Kernel launches with programmatic dependent launch (PDL, sm_90): a kernel
// may be launched while the one before it on the stream is still finishing,
// so that its grid launch and its CTAs' scheduling overlap that kernel's
// tail instead of following it. The CUDA graph of a frame keeps these as
// programmatic edges. The contract, on which correctness rests:
//
//   - every kernel launched through ck_launch begins with ck_pdl_enter(),
//     unconditionally, before it touches global memory: griddepcontrol.wait
//     returns once the previous kernel has completed and its writes are
//     visible, so nothing is read early and nothing still being read by it
//     is overwritten. Since each kernel waits for its predecessor before it
//     can complete, a kernel also follows every earlier one.
//   - then griddepcontrol.launch_dependents lets the next kernel launch once
//     every CTA of this one has started (only then: its later waves are
//     already resident, so the next kernel's waiting CTAs take no slot that
//     this one needs, and the chain of launched-but-waiting kernels is one
//     deep).
//
// A kernel launched without the attribute (cuBLAS's, or with
// a CK_CUDA_NO_PDL build, for A/B runs) keeps ordinary stream order; the
// instructions are no-ops for a kernel that was not launched early.
#ifndef CK_CUDA_LAUNCH_CUH
#define CK_CUDA_LAUNCH_CUH

#include <cuda_runtime.h>

#include <utility>

#include "cuda/kernels.h"

// whether launches take the PDL attribute: unless the build sets CK_CUDA_NO_PDL (device.cu)
extern "C" int ck_cuda_pdl_on(void);

__device__ __forceinline__ void ck_pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// kern<<<grid, block, smem, st>>>(args...) with the PDL attribute (unless
// switched off) and, when extra is not null, that launch attribute too (a
// cluster shape).
template <typename... P, typename... A>
static inline cudaError_t ck_launch_attr(void (*kern)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                                         const cudaLaunchAttribute *extra, A &&...args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute attr[2];
    unsigned n = 0;
    if (extra) attr[n++] = *extra;
    if (ck_cuda_pdl_on()) {
        attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[n].val.programmaticStreamSerializationAllowed = 1;
        n++;
    }
    cfg.attrs = attr;
    cfg.numAttrs = n;
    return cudaLaunchKernelEx(&cfg, kern, std::forward<A>(args)...);
}

template <typename... P, typename... A>
static inline cudaError_t ck_launch(void (*kern)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                                    A &&...args) {
    return ck_launch_attr(kern, grid, block, smem, st, nullptr, std::forward<A>(args)...);
}

#endif
