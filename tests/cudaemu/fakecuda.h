// fakecuda.h — a test double for the GPU, which this project cannot assume: a single-threaded
// CPU emulator of the parts of the CUDA runtime, cuBLAS and CUB that the CUDA backends use
// (embedder/backend_cuda.cu, engine/backend_cuda.cu + kernels_cuda.cuh, gateway/cuda_plugin.cu),
// and of SIMT execution: each GPU thread is a coroutine with real block barriers and warp
// shuffles, so the kernels run unchanged (after gen.py rewrites <<<>>> launches and __shared__
// declarations) and `make test-cuda-emu` runs tests/gpu/ against them on any machine.
//
// What it checks: the kernels' indexing and arithmetic (results against the CPU backends),
// barriers every thread reaches, full-warp shuffles, shared memory read before it is written
// and device memory nobody wrote (both poisoned with NaN, 0xff bytes), launch configurations,
// dynamic shared memory and __launch_bounds__ limits, kernel arguments and copies outside
// device allocations, stream order (streams are deferred queues that run at a synchronization
// point, so a missing synchronization shows), graph capture and replay, calls that would break
// a capture. EMU_ORDER=rev|rand reorders threads and blocks; EMU_REPORT=1 reports leaks at exit.
//
// What it cannot: cuBLAS's numerics (GemmEx is an F32 OpenBLAS product of the F16 operands:
// no tensor-core rounding or split reductions), real concurrency (threads run one at a time
// between barriers, so data races, missing __syncwarp and memory-ordering bugs go unseen and
// atomics are trivially atomic), and timing (events report 1 ms; nothing here measures speed).
// tests/gpu/ on a real GPU (make test-gpu) remains the reference.
#pragma once
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#include <math.h>

using std::max;
using std::min;

// ---------------------------------------------------------------- F16
struct __half { uint16_t x; };
struct alignas(4) __half2 { __half x, y; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
static inline float2 make_float2(float a, float b) { return float2{a, b}; }
static inline __half __float2half_rn(float f)
{
    uint32_t u; memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    int32_t e = (int32_t)((u >> 23) & 0xff);
    uint32_t man = u & 0x7fffff;
    __half h;
    if (e == 0xff) { h.x = (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0)); return h; }
    int32_t he = e - 127 + 15;
    if (he >= 31) { h.x = (uint16_t)(sign | 0x7c00); return h; }
    if (he <= 0) { // subnormal half
        if (he < -10) { h.x = (uint16_t)sign; return h; }
        man |= 0x800000;
        int shift = 14 - he;
        uint32_t hm = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1))) hm++;
        h.x = (uint16_t)(sign | hm); return h;
    }
    uint32_t hm = man >> 13, rem = man & 0x1fff;
    uint32_t r = sign | ((uint32_t)he << 10) | hm;
    if (rem > 0x1000 || (rem == 0x1000 && (hm & 1))) r++;
    h.x = (uint16_t)r; return h;
}
static inline float __half2float(__half h)
{
    uint32_t sign = (uint32_t)(h.x & 0x8000) << 16, e = (h.x >> 10) & 0x1f, man = h.x & 0x3ff, f;
    if (e == 0) {
        if (!man) f = sign;
        else { e = 127 - 15 + 1; while (!(man & 0x400)) { man <<= 1; e--; } f = sign | e << 23 | (man & 0x3ff) << 13; }
    } else if (e == 31) f = sign | 0x7f800000u | man << 13;
    else f = sign | (e + 127 - 15) << 23 | man << 13;
    float r; memcpy(&r, &f, 4); return r;
}
static inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }

// ---------------------------------------------------------------- runtime
typedef int cudaError_t;
enum {
    cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9, cudaErrorLaunchFailure = 719,
    cudaErrorStreamCaptureUnsupported = 900, cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorNotReady = 600, cudaErrorIllegalAddress = 700, cudaErrorInvalidResourceHandle = 400,
};
typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;
typedef struct emu_graph *cudaGraph_t;
typedef struct emu_graph *cudaGraphExec_t;
#define cudaStreamNonBlocking 1
struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
struct uint3 { unsigned x, y, z; };
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
                      cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1,
                             cudaStreamCaptureModeRelaxed = 2 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem, sharedMemPerBlock, sharedMemPerBlockOptin;
    int major, minor, multiProcessorCount, warpSize, maxThreadsPerBlock;
};

extern long emu_live_allocs;
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaMalloc(void **p, size_t n);
template <class T> static inline cudaError_t cudaMalloc(T **p, size_t n) { return cudaMalloc((void **)p, n); }
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t n);
template <class T> static inline cudaError_t cudaMallocHost(T **p, size_t n) { return cudaMallocHost((void **)p, n); }
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b);
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t st = 0);
cudaError_t cudaMemset(void *d, int v, size_t n);
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st = 0);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaStreamBeginCapture(cudaStream_t st, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *ge, cudaGraph_t g, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t ge, cudaStream_t st);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t ge);
cudaError_t emu_func_set_attribute(const void *f, cudaFuncAttribute a, int v);
template <class F> static inline cudaError_t cudaFuncSetAttribute(F *f, cudaFuncAttribute a, int v)
{ return emu_func_set_attribute((const void *)f, a, v); }

// ---------------------------------------------------------------- cuBLAS
typedef struct emu_blas *cublasHandle_t;
typedef int cublasStatus_t;
enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_ALLOC_FAILED = 3,
       CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_EXECUTION_FAILED = 13, CUBLAS_STATUS_NOT_SUPPORTED = 15 };
typedef enum { CUBLAS_OP_N, CUBLAS_OP_T } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes);
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt, int ldb,
    const void *beta, void *C, cudaDataType ct, int ldc, cublasComputeType_t comp, cublasGemmAlgo_t algo);

// ---------------------------------------------------------------- SIMT
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
#define __global__
#define __device__
#define __host__
#define __forceinline__
#define __launch_bounds__(...)
void emu_syncthreads(void);
void emu_warp_exchange(const void *v, size_t size, int src, void *out, unsigned mask);
void emu_shared(void *p, size_t bytes);     // a static __shared__ variable: poisoned per block
void *emu_dyn_smem_ptr(void);               // the block's dynamic shared memory
void emu_bounds(unsigned max_threads);      // __launch_bounds__
template <class T> static inline T *emu_dyn_smem() { return (T *)emu_dyn_smem_ptr(); }
#define __syncthreads() emu_syncthreads()
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src)
{ T r; emu_warp_exchange(&v, sizeof v, src, &r, mask); return r; }
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int x)
{ T r; emu_warp_exchange(&v, sizeof v, (int)((threadIdx.x & 31) ^ (unsigned)x), &r, mask); return r; }
// threads run one at a time, never preempted between barriers: read-modify-write is atomic
static inline int atomicMin(int *p, int v) { int o = *p; *p = v < o ? v : o; return o; }
static inline int atomicMax(int *p, int v) { int o = *p; *p = v > o ? v : o; return o; }
static inline int atomicAdd(int *p, int v) { int o = *p; *p = o + v; return o; }
static inline float atomicAdd(float *p, float v) { float o = *p; *p = o + v; return o; }

// Launch: checks the configuration now (errors as cudaGetLastError() reports them), converts
// the arguments to the kernel's parameter types now, and runs (or records) the grid on st.
bool emu_check_launch(const void *f, dim3 g, dim3 b, size_t smem);
bool emu_check_ptr_arg(const void *p, int index);
void emu_enqueue(cudaStream_t st, std::function<void()> job, const char *what);
void emu_run(dim3 grid, dim3 block, size_t smem, const std::function<void()> &body);
template <class T> static inline void emu_check_arg(const T &v, int i, bool &ok)
{
    if constexpr (std::is_pointer_v<T>)
        ok = emu_check_ptr_arg((const void *)v, i) && ok;
}
template <class... P, class... A>
static inline void emu_launch(void (*f)(P...), dim3 g, dim3 b, size_t smem, cudaStream_t st, A &&...args)
{
    if (!emu_check_launch((const void *)f, g, b, smem))
        return;
    std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
    bool ok = true;
    int i = 0;
    std::apply([&](const auto &...v) { (emu_check_arg(v, i++, ok), ...); }, params);
    if (!ok)
        return;
    emu_enqueue(st, [f, g, b, smem, params]() {
        emu_run(g, b, smem, [&]() {
            std::tuple<std::decay_t<P>...> mine = params; // each thread its own parameters
            std::apply(f, mine);
        });
    }, "kernel");
}

// cudaLaunchKernelEx: the launch attributes are accepted and have no effect here (kernels of
// a stream run one after the other, so programmatic dependent launch changes nothing)
enum cudaLaunchAttributeID { cudaLaunchAttributeProgrammaticStreamSerialization = 6 };
struct cudaLaunchAttribute {
    cudaLaunchAttributeID id;
    struct { unsigned programmaticStreamSerializationAllowed; } val;
};
struct cudaLaunchConfig_t {
    dim3 gridDim, blockDim;
    size_t dynamicSmemBytes;
    cudaStream_t stream;
    cudaLaunchAttribute *attrs;
    unsigned numAttrs;
};
cudaError_t cudaPeekAtLastError(void);
template <class... P, class... A>
static inline cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t *c, void (*f)(P...), A &&...args)
{
    emu_launch(f, c->gridDim, c->blockDim, c->dynamicSmemBytes, c->stream, std::forward<A>(args)...);
    return cudaPeekAtLastError();
}

// ---------------------------------------------------------------- CUB
void emu_cub_barrier(void);
namespace cub {
template <class T> static inline T emu_poison()
{
    if constexpr (std::is_floating_point_v<T>) return (T)NAN;
    else return (T)0x5a5a5a5a;
}
// Block-wide collectives through their TempStorage, with CUB's contract: every thread of the
// block calls them; Reduce's result is valid in thread 0 only (the others get poison);
// TempStorage may not be reused before a __syncthreads() (the reads after the internal
// barrier are not followed by one).
template <class T, int N> class BlockReduce {
public:
    struct TempStorage { T v[N]; };
    explicit BlockReduce(TempStorage &t) : s(t) { if (blockDim.x != (unsigned)N) { fprintf(stderr, "EMU: BlockReduce<%d> in a block of %u\n", N, blockDim.x); abort(); } }
    template <class Op> T Reduce(T in, Op op)
    {
        s.v[threadIdx.x] = in;
        emu_cub_barrier();
        if (threadIdx.x != 0) return emu_poison<T>();
        T a = s.v[0];
        for (int i = 1; i < N; i++) a = op(a, s.v[i]);
        return a;
    }
    T Sum(T in) { return Reduce(in, [](const T &a, const T &b) { return a + b; }); }
private:
    TempStorage &s;
};
template <class T, int N> class BlockScan {
public:
    struct TempStorage { T v[N]; };
    explicit BlockScan(TempStorage &t) : s(t) { if (blockDim.x != (unsigned)N) { fprintf(stderr, "EMU: BlockScan<%d> in a block of %u\n", N, blockDim.x); abort(); } }
    void ExclusiveSum(T in, T &out, T &aggregate)
    {
        s.v[threadIdx.x] = in;
        emu_cub_barrier();
        T a = T(0), b = T(0);
        for (unsigned i = 0; i < (unsigned)N; i++) {
            if (i == threadIdx.x) a = b;
            b = b + s.v[i];
        }
        out = a;
        aggregate = b;
    }
    void ExclusiveSum(T in, T &out) { T agg; ExclusiveSum(in, out, agg); }
private:
    TempStorage &s;
};
struct DeviceSegmentedRadixSort {
    static cudaError_t SortPairsDescending(void *tmp, size_t &tmp_bytes, const float *kin, float *kout,
                                           const int *vin, int *vout, int num_items, int num_segments,
                                           const int *begin, const int *end, int begin_bit = 0,
                                           int end_bit = 32, cudaStream_t st = 0);
};
} // namespace cub
