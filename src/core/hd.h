/* CK_HD: how a function defined in a header shared by C11 and CUDA C++ is
 * declared: `static inline` in C; under nvcc `static __host__ __device__
 * __forceinline__`, so that the kernels and the host code (the CPU ops, the
 * host tests) run one definition. */
#ifndef CK_CORE_HD_H
#define CK_CORE_HD_H

#ifdef __CUDACC__
#define CK_HD static __host__ __device__ __forceinline__
#else
#define CK_HD static inline
#endif

#endif
