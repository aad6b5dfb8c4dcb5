/* attnc runtime, Vulkan part: what kernels compiled with
 * `attnc compile --target=vulkan` run on. libvulkan is loaded with dlopen
 * on first use (no link-time dependency): a machine without it, or without
 * a device, gets ATTNC_STATUS_NO_DEVICE from attnc_vk_context_create.
 *
 * A host program creates a context, makes device buffers, uploads its
 * inputs, calls the kernel's entry point with the context and the buffers
 * (int32_t f(attnc_vk_context *, attnc_vk_buffer *q, ...), the same status
 * codes as CPU kernels), and downloads the outputs:
 *
 *   attnc_vk_context *ctx;
 *   if (attnc_vk_context_create(&ctx) != ATTNC_STATUS_OK) ...;
 *   attnc_vk_buffer *q = attnc_vk_buffer_create(ctx, bytes); ...
 *   attnc_vk_upload(q, host_q, bytes);
 *   int32_t status = f(ctx, q, k, v, o);   // waits for the GPU
 *   attnc_vk_download(o, host_o, bytes);
 *
 * A context is used by one host thread at a time (nothing in it locks);
 * distinct contexts are independent. Each loads libvulkan for itself.
 * Buffers live in host-visible memory (device-local too where the device has
 * such memory) and stay mapped: uploads and downloads are copies, made after
 * the work recorded so far has run. */
#ifndef ATTNC_VULKAN_H
#define ATTNC_VULKAN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attnc_vk_context attnc_vk_context;
typedef struct attnc_vk_buffer attnc_vk_buffer;

/* Creates a context on the first Vulkan 1.1+ device with a compute queue
 * (ATTNC_VULKAN_DEVICE=<index> picks another among those). The device gets
 * the features kernels may use where it has them: 16-bit storage buffers,
 * f16 and i8 arithmetic, i16/i64/f64, f16 subgroup operations. Returns a
 * status (NO_DEVICE without libvulkan, a driver or such a device); on
 * failure *out is null. */
int attnc_vk_context_create(attnc_vk_context **out);
/* Frees everything the context owns (buffers still alive included); work
 * recorded and not finished is dropped. Null is allowed. */
void attnc_vk_context_destroy(attnc_vk_context *ctx);
/* The device's name (static for the context's lifetime; "" for null). */
const char *attnc_vk_device_name(const attnc_vk_context *ctx);
/* The device's default subgroup size (VkPhysicalDeviceSubgroupProperties). */
uint32_t attnc_vk_subgroup_size(const attnc_vk_context *ctx);

/* A device buffer of `bytes` bytes (> 0), or null when out of memory, bytes
 * is 0 or ctx is null. Freed with attnc_vk_buffer_destroy (which first runs
 * the work recorded so far) or with the context. */
attnc_vk_buffer *attnc_vk_buffer_create(attnc_vk_context *ctx, uint64_t bytes);
void attnc_vk_buffer_destroy(attnc_vk_buffer *buffer);
uint64_t attnc_vk_buffer_size(const attnc_vk_buffer *buffer);
/* Copies between host memory and the first `bytes` bytes of a buffer
 * (bytes <= its size, else ATTNC_STATUS_BAD_BUFFER; a null pointer:
 * ATTNC_STATUS_NULL_ARGUMENT). */
int attnc_vk_upload(attnc_vk_buffer *dst, const void *src, uint64_t bytes);
int attnc_vk_download(const attnc_vk_buffer *src, void *dst, uint64_t bytes);

/* ---- Called by generated code, not by host programs. ---- */

/* Records one compute dispatch: the SPIR-V module `spirv` (`words` 32-bit
 * words, a static of the kernel object: shader modules and pipelines are
 * created once per (context, module, entry) and cached in the context),
 * its entry point `entry`, `groups_x/y/z` workgroups, and `count` storage
 * buffers (at most 64) bound at descriptor set 0, bindings 0..count-1.
 * Each buffer must be of ctx and hold at least bytes[i] bytes, else
 * ATTNC_STATUS_BAD_BUFFER; more workgroups than the device allows:
 * ATTNC_STATUS_BAD_SIZE; an empty grid records nothing (its buffers may be
 * null). Dispatches run in order, each seeing the writes of the ones before.
 * After a failure the context keeps the first error, later calls do nothing,
 * and attnc_vk_finish drops what was recorded, so a failed kernel writes
 * nothing. The cache is keyed by the blob's address: a blob must not be
 * freed and another put in its place while the context lives. */
void attnc_vk_dispatch(attnc_vk_context *ctx, const uint32_t *spirv,
                       uint64_t words, const char *entry, uint32_t groups_x,
                       uint32_t groups_y, uint32_t groups_z, uint32_t count,
                       attnc_vk_buffer *const *buffers, const uint64_t *bytes);
/* A scratch buffer for a kernel's intermediate (null for 0 bytes, and after
 * an error; out of memory is kept as the context's error) and its release,
 * deferred to the next attnc_vk_finish (null is allowed). */
attnc_vk_buffer *attnc_vk_scratch(attnc_vk_context *ctx, uint64_t bytes);
void attnc_vk_release(attnc_vk_context *ctx, attnc_vk_buffer *buffer);
/* The context's trap: a 4-byte buffer, zero until a kernel stores a nonzero
 * word in it to say that its loops were cut short (ATTNC_STATUS_DEVICE_LIMIT,
 * taken as the context's error when the work is waited for); null after an
 * error. */
attnc_vk_buffer *attnc_vk_trap(attnc_vk_context *ctx);
/* Submits what was recorded, waits for it, releases deferred buffers, and
 * returns the first error since the last finish (then clears it). */
int attnc_vk_finish(attnc_vk_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* ATTNC_VULKAN_H */
