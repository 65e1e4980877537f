// emu.cpp — the runtime of the CPU emulator of the GPU (a test double; see fakecuda.h for what
// it checks and what it cannot: cuBLAS numerics, real concurrency and races, timing): the SIMT
// scheduler (coroutines on ucontext/longjmp), memory tracking, deferred streams, events, graph
// capture and replay, cuBLAS GemmEx on OpenBLAS, CUB's segmented sort on the host.
#include "fakecuda.h"
#include <cblas.h>
#include <cstdarg>
#include <map>
#include <set>
#include <setjmp.h>
#include <ucontext.h>
#include <unordered_map>

long emu_live_allocs, emu_gemms, emu_blocks, emu_switches, emu_launches;
uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "EMU: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

// ================================================================ SIMT scheduler
namespace {
enum { RUN, WAIT_WARP, WAIT_BLOCK, DONE };
struct th {
    jmp_buf jb;
    int state, inited;
    unsigned shfl;
    char *stack;
};
constexpr size_t STACK = 256 * 1024;
th ths[1024];
jmp_buf sched;
int cur;
const std::function<void()> *body;
uint64_t slot[2][32][32]; // [parity][warp][lane]
std::vector<void *> shared_seen;
void *dyn_smem;
size_t dyn_bytes;
int order_mode = -1; // 0 forward, 1 reverse, 2 random (EMU_ORDER=fwd|rev|rand)
uint64_t order_rng = 88172645463325252ull;
int in_kernel;

void trampoline()
{
    for (;;) {
        (*body)();
        ths[cur].state = DONE;
        if (!_setjmp(ths[cur].jb))
            _longjmp(sched, 1);
        // resumed at the start of the next block
    }
}

void yield(int state)
{
    th &t = ths[cur];
    t.state = state;
    if (!_setjmp(t.jb))
        _longjmp(sched, 1);
}

[[noreturn]] void fail(const char *why)
{
    die("%s (block %u,%u,%u thread %u)", why, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x);
}
} // namespace

void emu_syncthreads(void)
{
    if (!in_kernel) die("__syncthreads outside a kernel");
    yield(WAIT_BLOCK);
}
void emu_cub_barrier(void) { emu_syncthreads(); }

void emu_warp_exchange(const void *v, size_t size, int src, void *out, unsigned mask)
{
    if (mask != 0xffffffffu) fail("partial shuffle mask");
    if (src < 0 || src > 31) fail("shuffle source lane out of range");
    th &t = ths[cur];
    int w = (int)(threadIdx.x / 32), lane = (int)(threadIdx.x % 32), p = t.shfl++ & 1;
    uint64_t raw = 0;
    memcpy(&raw, v, size);
    slot[p][w][lane] = raw;
    yield(WAIT_WARP);
    memcpy(out, &slot[p][w][src], size);
}

void emu_shared(void *p, size_t bytes)
{
    for (void *q : shared_seen)
        if (q == p) return;
    memset(p, 0xff, bytes); // NaN: shared memory holds garbage at the start of a block
    shared_seen.push_back(p);
}

void *emu_dyn_smem_ptr(void)
{
    return dyn_smem;
}

void emu_bounds(unsigned max_threads)
{
    if (blockDim.x * blockDim.y * blockDim.z > max_threads)
        fail("block larger than the kernel's __launch_bounds__ (a launch failure on a GPU)");
}

void emu_run(dim3 grid, dim3 block, size_t smem, const std::function<void()> &b)
{
    if (order_mode < 0) {
        const char *o = getenv("EMU_ORDER");
        order_mode = !o ? 0 : !strcmp(o, "rev") ? 1 : !strcmp(o, "rand") ? 2 : 0;
    }
    unsigned nt = block.x * block.y * block.z;
    if (block.y != 1 || block.z != 1 || nt % 32 || nt > 1024) fail("unsupported block shape");
    for (unsigned i = 0; i < nt; i++)
        if (!ths[i].stack) ths[i].stack = (char *)malloc(STACK);
    body = &b;
    blockDim = block;
    gridDim = grid;
    in_kernel = 1;
    emu_launches++;
    unsigned order[1024];
    for (unsigned i = 0; i < nt; i++) order[i] = order_mode == 1 ? nt - 1 - i : i;
    // blocks in order, reversed (EMU_ORDER=rev) or shuffled (rand): no block may depend on another
    const uint64_t nblocks = (uint64_t)grid.x * grid.y * grid.z;
    uint64_t mult = 1, add = 0;
    if (order_mode == 2 && nblocks > 1) { // a random affine permutation: mult coprime with nblocks
        order_rng ^= order_rng << 13; order_rng ^= order_rng >> 7; order_rng ^= order_rng << 17;
        add = order_rng % nblocks;
        mult = (order_rng >> 20) % nblocks | 1;
        while (std::__gcd(mult, nblocks) != 1) mult += 2;
    }
    for (uint64_t bi = 0; bi < nblocks; bi++) {
            {
                const uint64_t lin = order_mode == 1 ? nblocks - 1 - bi
                                   : order_mode == 2 ? (bi * mult + add) % nblocks : bi;
                const unsigned bx = (unsigned)(lin % grid.x), by = (unsigned)(lin / grid.x % grid.y),
                               bz = (unsigned)(lin / grid.x / grid.y);
                blockIdx = {bx, by, bz};
                emu_blocks++;
                shared_seen.clear();
                dyn_smem = smem ? malloc(smem) : nullptr;
                dyn_bytes = smem;
                if (dyn_smem) memset(dyn_smem, 0xff, smem);
                for (unsigned i = 0; i < nt; i++) {
                    ths[i].state = RUN;
                    ths[i].shfl = 0;
                }
                for (;;) {
                    if (order_mode == 2)
                        for (unsigned i = nt - 1; i > 0; i--) {
                            order_rng ^= order_rng << 13; order_rng ^= order_rng >> 7; order_rng ^= order_rng << 17;
                            unsigned j = (unsigned)(order_rng % (i + 1)), x = order[i];
                            order[i] = order[j]; order[j] = x;
                        }
                    for (unsigned k = 0; k < nt; k++) {
                        unsigned i = order[k];
                        if (ths[i].state != RUN) continue;
                        cur = (int)i;
                        threadIdx = {i, 0, 0};
                        emu_switches++;
                        if (!_setjmp(sched)) {
                            if (!ths[i].inited) {
                                ths[i].inited = 1;
                                ucontext_t tmp, uc;
                                getcontext(&uc);
                                uc.uc_stack.ss_sp = ths[i].stack;
                                uc.uc_stack.ss_size = STACK;
                                uc.uc_link = nullptr;
                                makecontext(&uc, trampoline, 0);
                                swapcontext(&tmp, &uc);
                            } else {
                                _longjmp(ths[i].jb, 1);
                            }
                        }
                    }
                    bool all_done = true, released = false;
                    for (unsigned i = 0; i < nt; i++) all_done &= ths[i].state == DONE;
                    if (all_done) break;
                    for (unsigned w = 0; w < nt / 32; w++) {
                        int nw = 0;
                        for (unsigned l = 0; l < 32; l++) nw += ths[w * 32 + l].state == WAIT_WARP;
                        if (nw == 32) {
                            for (unsigned l = 0; l < 32; l++) ths[w * 32 + l].state = RUN;
                            released = true;
                        } else if (nw) {
                            fail("warp diverged at a shuffle");
                        }
                    }
                    if (released) continue;
                    int nb = 0, nd = 0;
                    for (unsigned i = 0; i < nt; i++) {
                        nb += ths[i].state == WAIT_BLOCK;
                        nd += ths[i].state == DONE;
                    }
                    if (nb && nd) fail("__syncthreads with exited threads");
                    if (nb == (int)nt) {
                        for (unsigned i = 0; i < nt; i++) ths[i].state = RUN;
                        continue;
                    }
                    fail("deadlock");
                }
                free(dyn_smem);
                dyn_smem = nullptr;
            }
    }
    in_kernel = 0;
}

// ================================================================ memory
namespace {
struct alloc { size_t size; int pinned; };
std::map<uintptr_t, alloc> allocs;
size_t dev_used;
const size_t DEV_TOTAL = (size_t)8 << 30; // the emulated device's memory
cudaError_t last_error;
int capturing; // streams in capture
std::set<cudaStream_t> streams;
std::unordered_map<const void *, int> max_dyn_smem;
long live_streams, live_events, live_graphs, live_handles;
int report_registered;

const alloc *find(const void *p, size_t n, uintptr_t *base)
{
    uintptr_t a = (uintptr_t)p;
    auto it = allocs.upper_bound(a);
    if (it == allocs.begin()) return nullptr;
    --it;
    if (a < it->first || a + n > it->first + it->second.size) return nullptr;
    if (base) *base = it->first;
    return &it->second;
}

void report()
{
    if (getenv("EMU_REPORT"))
        fprintf(stderr, "EMU report: %ld launches, %ld blocks, %ld gemms; live: %ld device allocations "
                        "(%zu bytes), %ld streams, %ld events, %ld graphs, %ld cuBLAS handles\n",
                emu_launches, emu_blocks, emu_gemms, emu_live_allocs, dev_used, live_streams,
                live_events, live_graphs, live_handles);
}

cudaError_t set_error(cudaError_t e) { if (e) last_error = e; return e; }

// a call that may not happen while a stream is captured (cudaStreamCaptureModeThreadLocal)
bool capture_violation(const char *what);
} // namespace

struct emu_stream {
    std::vector<std::pair<std::function<void()>, const char *>> q;
    int capturing, invalid;
    std::vector<std::function<void()>> cap;
};
struct emu_event { int recorded, done; cudaStream_t st; };
struct emu_graph { std::vector<std::function<void()>> jobs; int exec; };
struct emu_blas { cudaStream_t st; void *ws; size_t ws_bytes; };

namespace {
bool capture_violation(const char *what)
{
    if (!capturing) return false;
    fprintf(stderr, "EMU: %s during stream capture: invalidates the capture\n", what);
    for (cudaStream_t s : streams)
        if (s->capturing) s->invalid = 1;
    return true;
}

void flush(cudaStream_t s)
{
    if (!s) return;
    // jobs never enqueue on the stream they run on
    auto q = std::move(s->q);
    s->q.clear();
    for (auto &j : q) j.first();
}

void flush_all()
{
    for (cudaStream_t s : streams) flush(s);
}
} // namespace

void emu_enqueue(cudaStream_t st, std::function<void()> job, const char *what)
{
    if (!st) { // the legacy stream: at once (the engine's streams do not wait for it)
        job();
        return;
    }
    if (!streams.count(st)) die("work enqueued on a destroyed or unknown stream");
    if (st->capturing) {
        st->cap.push_back(std::move(job));
        return;
    }
    st->q.emplace_back(std::move(job), what);
}

const char *cudaGetErrorString(cudaError_t e) { return e ? "emulated error" : "no error"; }
const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case 0: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    default: return "cudaErrorEmu";
    }
}
cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return 0; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev)
{
    if (dev != 0) return set_error(cudaErrorInvalidValue);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "Emulated GPU (CPU emulator)");
    p->totalGlobalMem = DEV_TOTAL;
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    return 0;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? 0 : set_error(cudaErrorInvalidValue); }
cudaError_t cudaDeviceSynchronize(void)
{
    if (capture_violation("cudaDeviceSynchronize")) return set_error(cudaErrorStreamCaptureUnsupported);
    flush_all();
    return last_error;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned)
{
    if (!report_registered) { report_registered = 1; atexit(report); }
    *s = new emu_stream();
    streams.insert(*s);
    live_streams++;
    return 0;
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (!s || !streams.count(s)) die("cudaStreamDestroy of an unknown stream");
    if (s->capturing) die("cudaStreamDestroy of a capturing stream");
    flush(s); // work already enqueued completes
    streams.erase(s);
    delete s;
    live_streams--;
    return 0;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (s && !streams.count(s)) die("cudaStreamSynchronize of an unknown stream");
    if (s && s->capturing) {
        s->invalid = 1;
        return set_error(cudaErrorStreamCaptureUnsupported);
    }
    flush(s);
    return last_error;
}
cudaError_t cudaGetLastError(void) { cudaError_t e = last_error; last_error = 0; return e; }
cudaError_t cudaPeekAtLastError(void) { return last_error; }

static cudaError_t do_malloc(void **p, size_t n, int pinned)
{
    if (capture_violation(pinned ? "cudaMallocHost" : "cudaMalloc")) return set_error(cudaErrorStreamCaptureUnsupported);
    if (!pinned && dev_used + n > DEV_TOTAL) { *p = nullptr; return set_error(cudaErrorMemoryAllocation); }
    *p = malloc(n ? n : 1);
    if (!*p) return set_error(cudaErrorMemoryAllocation);
    memset(*p, 0xff, n); // NaN in F32 and F16, -1 in int: reading what nobody wrote shows
    allocs[(uintptr_t)*p] = alloc{n, pinned};
    if (!pinned) dev_used += n;
    emu_live_allocs++;
    return 0;
}
static cudaError_t do_free(void *p, int pinned)
{
    if (!p) return 0;
    if (capture_violation("cudaFree")) return set_error(cudaErrorStreamCaptureUnsupported);
    flush_all(); // cudaFree waits for the device
    auto it = allocs.find((uintptr_t)p);
    if (it == allocs.end()) die("%s of %p: not an allocation", pinned ? "cudaFreeHost" : "cudaFree", p);
    if (it->second.pinned != pinned) die("%s of a %s allocation", pinned ? "cudaFreeHost" : "cudaFree", it->second.pinned ? "pinned" : "device");
    if (!pinned) dev_used -= it->second.size;
    memset(p, 0xfe, it->second.size);
    allocs.erase(it);
    free(p);
    emu_live_allocs--;
    return 0;
}
cudaError_t cudaMalloc(void **p, size_t n) { return do_malloc(p, n, 0); }
cudaError_t cudaFree(void *p) { return do_free(p, 0); }
cudaError_t cudaMallocHost(void **p, size_t n) { return do_malloc(p, n, 1); }
cudaError_t cudaFreeHost(void *p) { return do_free(p, 1); }
cudaError_t cudaMemGetInfo(size_t *f, size_t *t) { *f = DEV_TOTAL - dev_used; *t = DEV_TOTAL; return 0; }

static bool is_dev(const void *p, size_t n) { const alloc *a = find(p, n, nullptr); return a && !a->pinned; }
static bool in_any(const void *p) { return find(p, 0, nullptr) != nullptr; }

static void check_copy(void *d, const void *s, size_t n, cudaMemcpyKind k)
{
    bool dd = k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice;
    bool sd = k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice;
    if (k == cudaMemcpyDefault) return;
    if (dd && !is_dev(d, n)) die("memcpy (kind %d) of %zu bytes to %p: not inside a device allocation", k, n, d);
    if (sd && !is_dev(s, n)) die("memcpy (kind %d) of %zu bytes from %p: not inside a device allocation", k, n, s);
    if (!dd && in_any(d) && !find(d, n, nullptr)->pinned) die("memcpy kind %d to device memory", k);
    if (!sd && in_any(s) && !find(s, n, nullptr)->pinned) die("memcpy kind %d from device memory", k);
}

cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind k)
{
    if (capture_violation("cudaMemcpy")) return set_error(cudaErrorStreamCaptureUnsupported);
    check_copy(d, s, n, k);
    // the legacy stream: the engine's non-blocking streams are not waited for
    memcpy(d, s, n);
    return 0;
}

cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t st)
{
    check_copy(d, s, n, k);
    if (!n) return 0;
    const bool src_pageable = !in_any(s), dst_pageable = !in_any(d);
    if (st && st->capturing && (src_pageable || dst_pageable)) {
        st->invalid = 1;
        return set_error(cudaErrorStreamCaptureUnsupported);
    }
    if (src_pageable) { // staged now: the caller may reuse its buffer when this returns
        std::vector<char> stage((const char *)s, (const char *)s + n);
        emu_enqueue(st, [d, stage]() { memcpy(d, stage.data(), stage.size()); }, "memcpy H2D");
        return 0;
    }
    if (dst_pageable) { // to pageable memory: returns when the copy is done
        emu_enqueue(st, [d, s, n]() { memcpy(d, s, n); }, "memcpy D2H");
        flush(st);
        return 0;
    }
    emu_enqueue(st, [d, s, n]() { memcpy(d, s, n); }, "memcpy");
    return 0;
}
cudaError_t cudaMemset(void *d, int v, size_t n)
{
    if (capture_violation("cudaMemset")) return set_error(cudaErrorStreamCaptureUnsupported);
    if (!is_dev(d, n)) die("cudaMemset outside a device allocation");
    memset(d, v, n);
    return 0;
}
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st)
{
    if (!is_dev(d, n)) die("cudaMemsetAsync outside a device allocation");
    emu_enqueue(st, [d, v, n]() { memset(d, v, n); }, "memset");
    return 0;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { *e = new emu_event(); live_events++; return 0; }
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; live_events--; return 0; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st)
{
    e->recorded = 1;
    e->done = 0;
    e->st = st;
    emu_enqueue(st, [e]() { e->done = 1; }, "event");
    return 0;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    if (capture_violation("cudaEventSynchronize")) return set_error(cudaErrorStreamCaptureUnsupported);
    if (e->recorded) flush(e->st);
    return last_error;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    if (!a->recorded || !b->recorded) return set_error(cudaErrorInvalidResourceHandle);
    if (!a->done || !b->done) return set_error(cudaErrorNotReady);
    *ms = 1.0f; // no timing in the emulator
    return 0;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t st, cudaStreamCaptureMode)
{
    if (!st) return set_error(cudaErrorInvalidValue); // the legacy stream cannot be captured
    if (st->capturing) return set_error(cudaErrorInvalidValue);
    st->capturing = 1;
    st->invalid = 0;
    st->cap.clear();
    capturing++;
    return 0;
}
cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g)
{
    if (!st || !st->capturing) return set_error(cudaErrorInvalidValue);
    st->capturing = 0;
    capturing--;
    *g = nullptr;
    if (st->invalid) {
        st->cap.clear();
        return set_error(cudaErrorStreamCaptureInvalidated);
    }
    *g = new emu_graph{std::move(st->cap), 0};
    st->cap.clear();
    live_graphs++;
    return 0;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *ge, cudaGraph_t g, unsigned long long)
{
    if (!g) return set_error(cudaErrorInvalidValue);
    *ge = new emu_graph{g->jobs, 1};
    live_graphs++;
    return 0;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t ge, cudaStream_t st)
{
    if (!ge || !ge->exec) die("cudaGraphLaunch of something not an instantiated graph");
    for (auto &j : ge->jobs) emu_enqueue(st, j, "graph node");
    return 0;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) { if (g) { if (g->exec) die("cudaGraphDestroy of a graph exec"); delete g; live_graphs--; } return 0; }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t g) { if (g) { if (!g->exec) die("cudaGraphExecDestroy of a graph"); delete g; live_graphs--; } return 0; }

cudaError_t emu_func_set_attribute(const void *f, cudaFuncAttribute a, int v)
{
    if (a != cudaFuncAttributeMaxDynamicSharedMemorySize) return set_error(cudaErrorInvalidValue);
    if (v < 0 || v > (227 << 10)) return set_error(cudaErrorInvalidValue);
    max_dyn_smem[f] = v;
    return 0;
}

bool emu_check_launch(const void *f, dim3 g, dim3 b, size_t smem)
{
    unsigned long long nt = (unsigned long long)b.x * b.y * b.z;
    if (!nt || nt > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64 || !g.x || !g.y || !g.z ||
        g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535) {
        fprintf(stderr, "EMU: bad launch configuration grid (%u,%u,%u) block (%u,%u,%u)\n", g.x, g.y, g.z, b.x, b.y, b.z);
        set_error(cudaErrorInvalidConfiguration);
        return false;
    }
    auto it = max_dyn_smem.find(f);
    size_t lim = it == max_dyn_smem.end() ? (48 << 10) : (size_t)it->second;
    if (smem > lim) {
        fprintf(stderr, "EMU: %zu bytes of dynamic shared memory above the kernel's limit %zu\n", smem, lim);
        set_error(cudaErrorInvalidValue);
        return false;
    }
    return true;
}

bool emu_check_ptr_arg(const void *p, int index)
{
    if (!p || in_any(p)) return true;
    die("kernel argument %d (%p) points outside every device and pinned allocation", index, p);
}

// ================================================================ cuBLAS
static float h2f_table[65536];
static int h2f_ready;
const char *cublasGetStatusString(cublasStatus_t s) { return s ? "emulated cuBLAS error" : "CUBLAS_STATUS_SUCCESS"; }
cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    if (capture_violation("cublasCreate")) return CUBLAS_STATUS_NOT_SUPPORTED;
    *h = new emu_blas();
    live_handles++;
    return 0;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) { flush_all(); delete h; live_handles--; return 0; }
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) { h->st = s; return 0; }
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes)
{
    if (bytes && !is_dev(ws, bytes)) die("cublasSetWorkspace: not device memory");
    h->ws = ws;
    h->ws_bytes = bytes;
    return 0;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt, int ldb,
    const void *beta, void *C, cudaDataType ct, int ldc, cublasComputeType_t comp, cublasGemmAlgo_t)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (at != CUDA_R_16F || bt != CUDA_R_16F || ct != CUDA_R_32F || comp != CUBLAS_COMPUTE_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
    const int arows = ta == CUBLAS_OP_N ? m : k, acols = ta == CUBLAS_OP_N ? k : m;
    const int brows = tb == CUBLAS_OP_N ? k : n, bcols = tb == CUBLAS_OP_N ? n : k;
    if (lda < std::max(1, arows) || ldb < std::max(1, brows) || ldc < std::max(1, m))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!m || !n) return 0;
    if (h->st && h->st->capturing && !h->ws)
        fprintf(stderr, "EMU: warning: cuBLAS captured into a graph without cublasSetWorkspace\n");
    const size_t aext = acols ? ((size_t)(acols - 1) * lda + arows) * 2 : 0;
    const size_t bext = bcols ? ((size_t)(bcols - 1) * ldb + brows) * 2 : 0;
    const size_t cext = ((size_t)(n - 1) * ldc + m) * 4;
    if ((aext && !is_dev(A, aext)) || (bext && !is_dev(B, bext)) || !is_dev(C, cext))
        die("cublasGemmEx m %d n %d k %d: an operand reaches outside its device allocation", m, n, k);
    if (!h2f_ready) {
        for (int i = 0; i < 65536; i++) h2f_table[i] = __half2float(__half{(uint16_t)i});
        h2f_ready = 1;
    }
    const float al = *(const float *)alpha, be = *(const float *)beta; // host pointer mode: read now
    emu_enqueue(h->st, [=]() {
        // only the elements the product reads are converted (the rest may be unwritten NaN)
        std::vector<float> a((size_t)lda * acols, 0.0f), b((size_t)ldb * bcols, 0.0f);
        const uint16_t *Ah = (const uint16_t *)A, *Bh = (const uint16_t *)B;
        for (int j = 0; j < acols; j++) for (int i = 0; i < arows; i++) a[(size_t)j * lda + i] = h2f_table[Ah[(size_t)j * lda + i]];
        for (int j = 0; j < bcols; j++) for (int i = 0; i < brows; i++) b[(size_t)j * ldb + i] = h2f_table[Bh[(size_t)j * ldb + i]];
        float *Cf = (float *)C;
        if (be == 0.0f) // C is not read
            for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) Cf[(size_t)j * ldc + i] = 0.0f;
        if (k > 0)
            cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                        m, n, k, al, a.data(), lda, b.data(), ldb, be == 0.0f ? 0.0f : be, Cf, ldc);
        else if (be != 0.0f && be != 1.0f)
            for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) Cf[(size_t)j * ldc + i] *= be;
        emu_gemms++;
    }, "gemm");
    return 0;
}

// ================================================================ CUB segmented sort
cudaError_t cub::DeviceSegmentedRadixSort::SortPairsDescending(void *tmp, size_t &tmp_bytes, const float *kin, float *kout,
    const int *vin, int *vout, int num_items, int num_segments, const int *begin, const int *end, int begin_bit,
    int end_bit, cudaStream_t st)
{
    const size_t need = 4096 + (size_t)num_items * 8 + (size_t)num_segments * 8;
    if (!tmp) {
        tmp_bytes = need;
        return 0;
    }
    if (tmp_bytes < need || !is_dev(tmp, need)) return set_error(cudaErrorInvalidValue);
    if (begin_bit != 0 || end_bit != 32) die("SortPairsDescending: partial bit range not emulated");
    if (num_items < 0 || num_segments < 0) return set_error(cudaErrorInvalidValue);
    const size_t ni = (size_t)num_items;
    if (ni && (!is_dev(kin, ni * 4) || !is_dev(kout, ni * 4) || !is_dev(vin, ni * 4) || !is_dev(vout, ni * 4)))
        die("SortPairsDescending: keys or values outside device memory");
    if (num_segments && (!is_dev(begin, (size_t)num_segments * 4) || !is_dev(end, (size_t)num_segments * 4)))
        die("SortPairsDescending: offsets outside device memory");
    if ((kin < kout + ni && kout < kin + ni) || (vin < vout + ni && vout < vin + ni))
        die("SortPairsDescending: input and output overlap");
    memset(tmp, 0xff, need); // the scratch holds nothing afterwards
    emu_enqueue(st, [=]() {
        for (int s = 0; s < num_segments; s++) {
            const int b = begin[s], e = end[s];
            if (b < 0 || e > num_items || b > e) die("SortPairsDescending: segment %d [%d, %d) outside [0, %d)", s, b, e, num_items);
            std::vector<std::pair<uint32_t, int>> v;
            v.reserve((size_t)(e - b));
            for (int i = b; i < e; i++) {
                uint32_t u;
                memcpy(&u, &kin[i], 4);
                u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); // radix order of float bits
                v.emplace_back(u, i);
            }
            // radix sort is stable: equal keys keep their input order
            std::stable_sort(v.begin(), v.end(), [](const auto &x, const auto &y) { return x.first > y.first; });
            for (int i = b; i < e; i++) {
                kout[i] = kin[v[(size_t)(i - b)].second];
                vout[i] = vin[v[(size_t)(i - b)].second];
            }
        }
    }, "segmented sort");
    return 0;
}
