/* attnc runtime: status codes and shared services of generated kernels. */
#ifndef ATTNC_RUNTIME_H
#define ATTNC_RUNTIME_H

#ifdef __cplusplus
extern "C" {
#endif

/* Every exported kernel entry point returns one of these. */
typedef enum attnc_status {
  ATTNC_STATUS_OK = 0,
  /* A tensor pointer was null; nothing was written. */
  ATTNC_STATUS_NULL_ARGUMENT = 1,
  /* A dynamic size was out of range; nothing was written. */
  ATTNC_STATUS_BAD_SIZE = 2,
  /* Memory for the kernel's scratch could not be allocated (see
   * attnc_out_of_memory). */
  ATTNC_STATUS_OUT_OF_MEMORY = 3,
  /* An internal error of the compiler or runtime. */
  ATTNC_STATUS_INTERNAL = 4,
  /* The kernel uses AMX tiles and the OS did not grant this process their
   * state (Linux arch_prctl ARCH_REQ_XCOMP_PERM); nothing was written. */
  ATTNC_STATUS_NO_AMX = 5,
  /* No usable GPU: the driver library (libvulkan, libcuda) could not be
   * loaded or initialized, or it offers no device with what the kernels
   * need (no such CUDA device). */
  ATTNC_STATUS_NO_DEVICE = 6,
  /* The GPU driver reported an error (device lost, a failed submission,
   * shader or pipeline creation failed; a CUDA module that did not load, a
   * kernel not found in it, a failed launch or a kernel that faulted). */
  ATTNC_STATUS_DEVICE_ERROR = 7,
  /* A buffer argument is too small for the kernel, or belongs to another
   * context; nothing was written. */
  ATTNC_STATUS_BAD_BUFFER = 8,
  /* The device cut a kernel's loops short, so its results are wrong and
   * must not be used: Mesa's lavapipe (llvmpipe) ends every loop of an
   * invocation once that invocation has run 65535 loop iterations in all,
   * without an error of its own. Kernels compiled for Vulkan detect this
   * and report it here; smaller shapes (shorter sequences, or a GPU
   * driver) avoid it. */
  ATTNC_STATUS_DEVICE_LIMIT = 9
} attnc_status;

/* A static, human-readable description of a status code. */
const char *attnc_status_string(int status);

#include <stdint.h>

/* The body of a parallel loop: runs tasks [begin, end). */
typedef void (*attnc_task_fn)(void *ctx, int64_t begin, int64_t end);

/* Runs tasks [0, n) on the process's thread pool (the caller works too) and
 * returns when all are done. Generated kernels call it for their outer
 * loops. The pool starts on first use with ATTNC_NUM_THREADS threads, or
 * one per online core. A call made while another is running (from another
 * host thread) runs its tasks in the calling thread. */
void attnc_parallel_for(int64_t n, attnc_task_fn fn, void *ctx);

/* attnc_parallel_for on at most max_threads threads (kernels compiled with
 * a thread count call it; max_threads <= 0 means no limit). */
void attnc_parallel_for_threads(int64_t n, attnc_task_fn fn, void *ctx,
                                int max_threads);

/* The threads parallel loops use: attnc_set_num_threads's value if set
 * (>= 1, capped by the pool's size), else ATTNC_NUM_THREADS, else cores. */
int attnc_num_threads(void);
void attnc_set_num_threads(int n);

/* Asks the OS for the AMX tile data state of this process (once; later
 * calls return the first answer): 0 when granted, else -1. Kernels that
 * use AMX call it on entry. */
int attnc_amx_init(void);

/* The heap memory of generated kernels: MLIR's generic allocation functions
 * (finalize-memref-to-llvm's use-generic-functions), which kernels call for
 * their scratch. Blocks of 1 MiB or more are kept when freed and handed to
 * a later request they fit (at most twice its size), so that kernels called
 * again do not fault their scratch pages in anew; at most
 * ATTNC_WORKSPACE_CACHE_MB megabytes (default 256; 0: none) stay cached. */
void *_mlir_memref_to_llvm_alloc(uint64_t size);
void _mlir_memref_to_llvm_free(void *ptr);

/* What every exported entry point does around its work (KernelCall.c),
 * with a frame of ATTNC_KERNEL_FRAME_BYTES bytes, 16-byte aligned, on its
 * stack, that starts with a jmp_buf: attnc_kernel_enter(frame), then
 * setjmp(frame), the work, then attnc_kernel_leave(frame).
 * - Out of memory: an allocation of the kernel that fails calls
 *   attnc_out_of_memory, which jumps back to the innermost frame of this
 *   thread; the entry point then returns ATTNC_STATUS_OUT_OF_MEMORY. What
 *   the call had allocated by then is freed (the pool's workers'
 *   allocations for it too), and its outputs may be partly written. Without a
 * frame (a kernel called other than through its entry point) it aborts with a
 * message.
 * - Floating point: the work runs with denormals flushed to zero (FTZ and
 *   DAZ on x86), on the pool's threads too.
 * leave restores the previous frame and floating-point mode. */
#define ATTNC_KERNEL_FRAME_BYTES 256
void attnc_kernel_enter(void *frame);
void attnc_kernel_leave(void *frame);
void attnc_out_of_memory(void);

/* Frees every cached block; returns their bytes. */
int64_t attnc_workspace_release(void);

#ifdef __cplusplus
}
#endif

#endif /* ATTNC_RUNTIME_H */
