/* attnc runtime, CUDA part: what kernels compiled for NVIDIA GPUs run on.
 * libcuda (the driver API) is loaded with dlopen on first use, never linked:
 * a machine without the driver, or without a device, gets
 * ATTNC_STATUS_NO_DEVICE from attnc_cuda_context_create.
 *
 * A host program creates a context on a device, allocates device memory,
 * uploads its inputs, calls the kernel's entry point with the context, a
 * stream and the device pointers (the same status codes as CPU kernels),
 * waits for the stream and downloads the outputs:
 *
 *   attnc_cuda_context *ctx;
 *   if (attnc_cuda_context_create(0, &ctx) != ATTNC_STATUS_OK)
 *     fprintf(stderr, "%s\n", attnc_cuda_load_error());
 *   void *q = attnc_cuda_alloc(ctx, bytes); ...
 *   attnc_cuda_upload(ctx, q, host_q, bytes);
 *   int32_t status = f(ctx, NULL, q, k, v, o);   // queued on the stream
 *   if (status == ATTNC_STATUS_OK)
 *     status = attnc_cuda_synchronize(ctx, NULL);
 *   attnc_cuda_download(ctx, host_o, o, bytes);
 *
 * A context holds the device's primary context (the one the CUDA runtime
 * API uses too), so device pointers and streams of either work with the
 * other. Every driver call is made with it pushed as the current context
 * and popped after, leaving the calling thread's current context as it was.
 * A context is used by one host thread at a time (nothing in it locks, the
 * module cache included); distinct contexts are independent. */
#ifndef ATTNC_CUDA_H
#define ATTNC_CUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attnc_cuda_context attnc_cuda_context;
/* The driver's CUstream; NULL is the legacy default stream. */
typedef struct CUstream_st *attnc_cuda_stream;

/* Creates a context on CUDA device `device` (an ordinal of the driver's
 * cuDeviceGet), retaining its primary context. libcuda.so.1 is loaded from
 * the library path, or from the file ATTNC_CUDA_LIBRARY names when set.
 * Returns a status: NO_DEVICE when libcuda cannot be loaded (or lacks a
 * function the runtime needs), when cuInit fails, or when there is no such
 * device; attnc_cuda_load_error says why. On failure *out is null. */
int attnc_cuda_context_create(int device, attnc_cuda_context **out);
/* Unloads the modules the context loaded (after waiting for the device's
 * work) and releases the primary context. Memory allocated with the context
 * is not freed. Null is allowed. */
void attnc_cuda_context_destroy(attnc_cuda_context *ctx);
/* The device's name (static for the context's lifetime; "" for null). */
const char *attnc_cuda_device_name(const attnc_cuda_context *ctx);
/* The device's compute capability as major * 10 + minor (90 for sm_90);
 * 0 for null. */
int attnc_cuda_compute_capability(const attnc_cuda_context *ctx);
/* A message for the context's last failed driver call, such as
 * "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (invalid argument)"; while an
 * error is kept for attnc_cuda_finish, the message of that error. "" when
 * there was none (and for null). */
const char *attnc_cuda_last_error(const attnc_cuda_context *ctx);
/* Why the calling thread's last attnc_cuda_context_create failed (dlerror's
 * text, cuInit's error, ...); "" when it succeeded. A thread-local buffer,
 * valid until the thread's next create. */
const char *attnc_cuda_load_error(void);

/* ---- Host helpers, for host programs and tests. ---- */

/* `bytes` bytes of device memory (cuMemAlloc), or null when out of memory,
 * bytes is 0 or ctx is null. Freed with attnc_cuda_free (null is allowed). */
void *attnc_cuda_alloc(attnc_cuda_context *ctx, uint64_t bytes);
void attnc_cuda_free(attnc_cuda_context *ctx, void *device_ptr);
/* Copies `bytes` bytes between host and device memory (synchronous copies
 * on the legacy default stream: they wait for the work on blocking streams
 * first; synchronize a non-blocking stream before). A null pointer (with
 * bytes > 0) or context: ATTNC_STATUS_NULL_ARGUMENT; a driver error:
 * DEVICE_ERROR (message in attnc_cuda_last_error). */
int attnc_cuda_upload(attnc_cuda_context *ctx, void *dst_device,
                      const void *src_host, uint64_t bytes);
int attnc_cuda_download(attnc_cuda_context *ctx, void *dst_host,
                        const void *src_device, uint64_t bytes);
/* Waits for the work queued on `stream` (cuStreamSynchronize): OK, or the
 * error of a kernel that failed as it ran (DEVICE_ERROR);
 * ATTNC_STATUS_NULL_ARGUMENT for a null context. */
int attnc_cuda_synchronize(attnc_cuda_context *ctx, attnc_cuda_stream stream);

/* ---- Called by generated code, not by host programs. ---- */

/* Queues kernel `kernel` (a NUL-terminated name) of the image `image` on
 * `stream`: a grid of gx x gy x gz blocks of bx x by x bz threads,
 * `shared_bytes` bytes of dynamic shared memory (above 48 KiB the kernel's
 * CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES is raised first) and
 * `count` parameters, each pointer-sized: args[i] is the i-th parameter's
 * value (a device pointer), passed as kernelParams[i] = &args[i]. The image
 * is a fatbin, a cubin or NUL-terminated PTX, a static of the kernel object:
 * its module is loaded once per context and cached, keyed by the image's
 * address (an image must not be freed and another put in its place while
 * the context lives); functions are cached too. An empty grid (gx, gy or
 * gz 0) launches nothing. After a failure the context keeps the first
 * error, later launches and scratch allocations do nothing, and
 * attnc_cuda_finish returns it; a kernel that fails as it runs shows at
 * the stream's synchronization instead. */
void attnc_cuda_launch(attnc_cuda_context *ctx, attnc_cuda_stream stream,
                       const void *image, const char *kernel, uint32_t gx,
                       uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by,
                       uint32_t bz, uint32_t shared_bytes, uint32_t count,
                       void *const *args);
/* Scratch device memory for a kernel's intermediate, ordered on `stream`
 * (cuMemAllocAsync where the device has memory pools, else cuMemAlloc):
 * null for 0 bytes and after an error; out of memory is kept as the
 * context's error (ATTNC_STATUS_OUT_OF_MEMORY). */
void *attnc_cuda_scratch(attnc_cuda_context *ctx, attnc_cuda_stream stream,
                         uint64_t bytes);
/* Its release, ordered on `stream` after the work queued so far
 * (cuMemFreeAsync, else the stream is synchronized and the memory freed).
 * Runs after an error too, so that a failed kernel leaks nothing; null is
 * allowed. */
void attnc_cuda_release(attnc_cuda_context *ctx, attnc_cuda_stream stream,
                        void *ptr);
/* Returns the first error since the last finish (then clears it); does not
 * synchronize. ATTNC_STATUS_NULL_ARGUMENT for a null context. */
int attnc_cuda_finish(attnc_cuda_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* ATTNC_CUDA_H */
