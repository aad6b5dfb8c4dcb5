/* The Vulkan part of the attnc runtime (see vulkan.h).
 *
 * libvulkan is not linked: each context dlopens it and resolves every
 * function it uses through vkGetInstanceProcAddr / vkGetDeviceProcAddr into
 * its own table, so that programs built with the runtime start on machines
 * without Vulkan and get ATTNC_STATUS_NO_DEVICE there.
 *
 * A kernel call records its dispatches into the context's one command
 * buffer (begun on the first dispatch, each dispatch followed by a memory
 * barrier) and attnc_vk_finish submits it and waits on the context's fence.
 * Buffers live in host-visible, coherent memory (device-local too where the
 * device has such a type) that stays mapped, so uploads and downloads are
 * memcpy once the recorded work is done. Shader modules and pipelines are
 * cached for the context's lifetime, keyed by the address of the SPIR-V (a
 * static of the kernel object) and the entry point; descriptor sets come
 * from pools that every finish resets.
 *
 * A context is used by one host thread at a time: nothing here locks. */
#define _GNU_SOURCE /* dl_iterate_phdr, RTLD_NODELETE */
#include "attnc/vulkan.h"
#include "Reserve.h"
#include "attnc/runtime.h"

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

/* The most buffers one dispatch binds (set 0, bindings 0..count-1). */
#define ATTNC_VK_MAX_BUFFERS 64
/* Descriptor sets per pool; each set holds up to 8 buffers on average. */
#define ATTNC_VK_POOL_SETS 256
#define ATTNC_VK_SPIRV_MAGIC 0x07230203u

/* The functions a context resolves: instance-level ones with
 * vkGetInstanceProcAddr, device-level ones with vkGetDeviceProcAddr. The
 * destroy functions come first so that a partial load can still clean up. */
/* clang-format off */
#define ATTNC_VK_INSTANCE_FNS(X)                                               \
  X(DestroyInstance) X(EnumeratePhysicalDevices)                               \
  X(GetPhysicalDeviceProperties2) X(GetPhysicalDeviceFeatures2)                \
  X(GetPhysicalDeviceQueueFamilyProperties)                                    \
  X(GetPhysicalDeviceMemoryProperties) X(EnumerateDeviceExtensionProperties)   \
  X(CreateDevice) X(GetDeviceProcAddr)
#define ATTNC_VK_DEVICE_FNS(X)                                                 \
  X(DestroyDevice) X(DeviceWaitIdle) X(GetDeviceQueue) X(CreateCommandPool)    \
  X(DestroyCommandPool) X(ResetCommandPool) X(AllocateCommandBuffers)          \
  X(BeginCommandBuffer) X(EndCommandBuffer) X(QueueSubmit) X(CreateFence)      \
  X(DestroyFence) X(WaitForFences) X(ResetFences) X(CreateBuffer)              \
  X(DestroyBuffer) X(GetBufferMemoryRequirements) X(AllocateMemory)            \
  X(FreeMemory) X(BindBufferMemory) X(MapMemory) X(CreateShaderModule)         \
  X(DestroyShaderModule) X(CreateDescriptorSetLayout)                          \
  X(DestroyDescriptorSetLayout) X(CreatePipelineLayout)                        \
  X(DestroyPipelineLayout) X(CreateComputePipelines) X(DestroyPipeline)        \
  X(CreateDescriptorPool) X(DestroyDescriptorPool) X(ResetDescriptorPool)      \
  X(AllocateDescriptorSets) X(UpdateDescriptorSets) X(CmdBindPipeline)         \
  X(CmdBindDescriptorSets) X(CmdDispatch) X(CmdPipelineBarrier)
/* clang-format on */
#define ATTNC_VK_DECLARE(name) PFN_vk##name name;

/* A shader module, created once per SPIR-V blob. */
typedef struct {
  const uint32_t *spirv;
  uint64_t words;
  VkShaderModule module;
} module_t;

/* A pipeline and its layouts, created once per (blob, entry, count). */
typedef struct {
  const uint32_t *spirv;
  uint64_t words;
  char *entry;
  uint32_t count;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  VkPipeline pipeline;
} pipeline_t;

struct attnc_vk_buffer {
  attnc_vk_context *ctx;
  uint64_t size;
  VkBuffer buffer;
  VkDeviceMemory memory;
  void *data;                   /* mapped for the buffer's lifetime */
  int released;                 /* destroyed at the next finish */
  attnc_vk_buffer *prev, *next; /* the context's live buffers */
};

struct attnc_vk_context {
  void *library; /* libvulkan, dlopened by this context */
  PFN_vkGetInstanceProcAddr GetInstanceProcAddr;
  struct {
    ATTNC_VK_INSTANCE_FNS(ATTNC_VK_DECLARE)
    ATTNC_VK_DEVICE_FNS(ATTNC_VK_DECLARE)
  } vk;
  VkInstance instance;
  VkPhysicalDevice physical;
  VkPhysicalDeviceProperties props; /* name and limits */
  VkPhysicalDeviceMemoryProperties memory;
  uint32_t subgroup_size;
  uint32_t queue_family;
  VkDevice device;
  VkQueue queue;
  VkCommandPool command_pool;
  VkCommandBuffer commands;
  VkFence fence;
  int recording; /* commands begun and not yet submitted */
  int error;     /* the first error since the last finish */
  int releases;  /* buffers released since the last finish */
  attnc_vk_buffer *buffers;
  attnc_vk_buffer *trap; /* attnc_vk_trap's, made on first use */
  module_t *modules;
  int module_count, module_capacity;
  pipeline_t *pipelines;
  int pipeline_count, pipeline_capacity;
  VkDescriptorPool *pools; /* pools[pool_current] is being allocated from */
  int pool_count, pool_capacity, pool_current;
};

/* The status of a failed Vulkan call. */
static int vk_status(VkResult r) {
  return r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY
             ? ATTNC_STATUS_OUT_OF_MEMORY
             : ATTNC_STATUS_DEVICE_ERROR;
}

/* Keeps the first error until the next finish; returns 0. */
static int fail(attnc_vk_context *ctx, int status) {
  if (ctx->error == ATTNC_STATUS_OK)
    ctx->error = status;
  return 0;
}

/* Whether a Vulkan call succeeded; if not, keeps its error. */
static int ok(attnc_vk_context *ctx, VkResult r) {
  return r == VK_SUCCESS || fail(ctx, vk_status(r));
}

/* ---- Context creation ---- */

/* The creation steps return 1, or 0 with the error in ctx->error. */

/* Loads libvulkan and creates a Vulkan 1.1 instance without layers or
 * extensions, then resolves the instance-level functions. */
static int create_instance(attnc_vk_context *ctx) {
  ctx->library = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!ctx->library)
    ctx->library = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
  if (ctx->library)
    ctx->GetInstanceProcAddr =
        (PFN_vkGetInstanceProcAddr)dlsym(ctx->library, "vkGetInstanceProcAddr");
  PFN_vkCreateInstance create =
      ctx->GetInstanceProcAddr ? (PFN_vkCreateInstance)ctx->GetInstanceProcAddr(
                                     VK_NULL_HANDLE, "vkCreateInstance")
                               : NULL;
  if (!create)
    return fail(ctx, ATTNC_STATUS_NO_DEVICE);
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "attnc",
                           .pEngineName = "attnc",
                           .apiVersion = VK_API_VERSION_1_1};
  VkInstanceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app};
  VkInstance instance;
  VkResult r = create(&info, NULL, &instance);
  if (r != VK_SUCCESS) /* no driver (VK_ERROR_INCOMPATIBLE_DRIVER) or so */
    return fail(ctx, r == VK_ERROR_OUT_OF_HOST_MEMORY
                         ? ATTNC_STATUS_OUT_OF_MEMORY
                         : ATTNC_STATUS_NO_DEVICE);
  ctx->instance = instance;
  int loaded = 1;
#define ATTNC_VK_LOAD_INSTANCE(name)                                           \
  loaded = loaded && (ctx->vk.name = (PFN_vk##name)ctx->GetInstanceProcAddr(   \
                          ctx->instance, "vk" #name)) != NULL;
  ATTNC_VK_INSTANCE_FNS(ATTNC_VK_LOAD_INSTANCE)
#undef ATTNC_VK_LOAD_INSTANCE
  if (!loaded) {
    if (ctx->vk.DestroyInstance)
      ctx->vk.DestroyInstance(ctx->instance, NULL);
    ctx->instance = VK_NULL_HANDLE;
    return fail(ctx, ATTNC_STATUS_NO_DEVICE);
  }
  return 1;
}

/* The first queue family of `device` with compute, or UINT32_MAX. */
static uint32_t compute_family(attnc_vk_context *ctx, VkPhysicalDevice device) {
  VkQueueFamilyProperties families[64];
  uint32_t count = 64;
  ctx->vk.GetPhysicalDeviceQueueFamilyProperties(device, &count, families);
  for (uint32_t i = 0; i < count; ++i)
    if (families[i].queueCount > 0 &&
        (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT))
      return i;
  return UINT32_MAX;
}

/* Picks the ATTNC_VULKAN_DEVICE'th (default: first) Vulkan 1.1+ device with
 * a compute queue and reads its properties. */
static int pick_device(attnc_vk_context *ctx) {
  long wanted = 0;
  const char *env = getenv("ATTNC_VULKAN_DEVICE");
  if (env && *env) {
    char *end;
    wanted = strtol(env, &end, 10);
    if (*end || wanted < 0)
      return fail(ctx, ATTNC_STATUS_NO_DEVICE);
  }
  VkPhysicalDevice devices[64];
  uint32_t count = 64;
  VkResult r = ctx->vk.EnumeratePhysicalDevices(ctx->instance, &count, devices);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE)
    count = 0;
  long seen = 0;
  for (uint32_t i = 0; i < count; ++i) {
    VkPhysicalDeviceSubgroupProperties subgroup = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 props = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    /* The version first: a 1.0 device knows no subgroup properties. */
    ctx->vk.GetPhysicalDeviceProperties2(devices[i], &props);
    uint32_t family = compute_family(ctx, devices[i]);
    if (props.properties.apiVersion < VK_API_VERSION_1_1 ||
        family == UINT32_MAX || seen++ != wanted)
      continue;
    props.pNext = &subgroup;
    ctx->vk.GetPhysicalDeviceProperties2(devices[i], &props);
    ctx->physical = devices[i];
    ctx->props = props.properties;
    ctx->subgroup_size = subgroup.subgroupSize;
    ctx->queue_family = family;
    ctx->vk.GetPhysicalDeviceMemoryProperties(devices[i], &ctx->memory);
    return 1;
  }
  return fail(ctx, ATTNC_STATUS_NO_DEVICE);
}

/* Whether the physical device offers the device extension `name`. */
static int has_extension(attnc_vk_context *ctx, const char *name) {
  uint32_t count = 0;
  if (ctx->vk.EnumerateDeviceExtensionProperties(ctx->physical, NULL, &count,
                                                 NULL) != VK_SUCCESS)
    return 0;
  VkExtensionProperties *props = malloc((count ? count : 1) * sizeof *props);
  if (!props)
    return 0;
  int found = 0;
  VkResult r = ctx->vk.EnumerateDeviceExtensionProperties(ctx->physical, NULL,
                                                          &count, props);
  for (uint32_t i = 0; (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < count;
       ++i)
    found |= strcmp(props[i].extensionName, name) == 0;
  free(props);
  return found;
}

/* Creates the device with one compute queue and the features kernels may
 * use where the device has them (16-bit storage buffers, f16 and i8
 * arithmetic, i16/i64/f64, f16 subgroup operations), then resolves the
 * device-level functions. */
static int create_device(attnc_vk_context *ctx) {
  const char *extensions[2];
  uint32_t extension_count = 0;
  VkPhysicalDeviceShaderSubgroupExtendedTypesFeaturesKHR extended = {
      .sType =
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SUBGROUP_EXTENDED_TYPES_FEATURES_KHR};
  VkPhysicalDeviceShaderFloat16Int8FeaturesKHR f16 = {
      .sType =
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR};
  VkPhysicalDevice16BitStorageFeatures storage = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceFeatures2 features = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &storage};
  /* Before Vulkan 1.2 these two are extensions: chain them when offered. */
  void **tail = &storage.pNext;
  if (has_extension(ctx, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)) {
    extensions[extension_count++] = VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME;
    *tail = &f16;
    tail = &f16.pNext;
  }
  if (has_extension(ctx,
                    VK_KHR_SHADER_SUBGROUP_EXTENDED_TYPES_EXTENSION_NAME)) {
    extensions[extension_count++] =
        VK_KHR_SHADER_SUBGROUP_EXTENDED_TYPES_EXTENSION_NAME;
    *tail = &extended;
  }
  ctx->vk.GetPhysicalDeviceFeatures2(ctx->physical, &features);
  /* Enable only what kernels use (not, say, robustBufferAccess). */
  VkPhysicalDeviceFeatures has = features.features;
  memset(&features.features, 0, sizeof features.features);
  features.features.shaderInt16 = has.shaderInt16;
  features.features.shaderInt64 = has.shaderInt64;
  features.features.shaderFloat64 = has.shaderFloat64;
  storage.uniformAndStorageBuffer16BitAccess = VK_FALSE;
  storage.storagePushConstant16 = VK_FALSE;
  storage.storageInputOutput16 = VK_FALSE;

  float priority = 1.0f;
  VkDeviceQueueCreateInfo queue = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
      .queueFamilyIndex = ctx->queue_family,
      .queueCount = 1,
      .pQueuePriorities = &priority};
  VkDeviceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .pNext = &features,
                             .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &queue,
                             .enabledExtensionCount = extension_count,
                             .ppEnabledExtensionNames = extensions};
  VkDevice device;
  if (!ok(ctx, ctx->vk.CreateDevice(ctx->physical, &info, NULL, &device)))
    return 0;
  ctx->device = device;
  int loaded = 1;
#define ATTNC_VK_LOAD_DEVICE(name)                                             \
  loaded = loaded && (ctx->vk.name = (PFN_vk##name)ctx->vk.GetDeviceProcAddr(  \
                          ctx->device, "vk" #name)) != NULL;
  ATTNC_VK_DEVICE_FNS(ATTNC_VK_LOAD_DEVICE)
#undef ATTNC_VK_LOAD_DEVICE
  if (!loaded) {
    if (ctx->vk.DestroyDevice)
      ctx->vk.DestroyDevice(ctx->device, NULL);
    ctx->device = VK_NULL_HANDLE;
    return fail(ctx, ATTNC_STATUS_DEVICE_ERROR);
  }
  ctx->vk.GetDeviceQueue(ctx->device, ctx->queue_family, 0, &ctx->queue);
  return 1;
}

/* The command pool, its one command buffer and the fence finish waits on. */
static int create_commands(attnc_vk_context *ctx) {
  VkCommandPoolCreateInfo pool_info = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
      .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
      .queueFamilyIndex = ctx->queue_family};
  VkCommandPool pool;
  if (!ok(ctx, ctx->vk.CreateCommandPool(ctx->device, &pool_info, NULL, &pool)))
    return 0;
  ctx->command_pool = pool;
  VkCommandBufferAllocateInfo buffer = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
      .commandPool = pool,
      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
      .commandBufferCount = 1};
  VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence;
  if (!ok(ctx, ctx->vk.AllocateCommandBuffers(ctx->device, &buffer,
                                              &ctx->commands)) ||
      !ok(ctx, ctx->vk.CreateFence(ctx->device, &fence_info, NULL, &fence)))
    return 0;
  ctx->fence = fence;
  return 1;
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTNC_KEEP_DRIVERS 1
#endif
#endif

#ifdef ATTNC_KEEP_DRIVERS
/* Marks a loaded library never to be unloaded (dl_iterate_phdr callback). */
static int keep_loaded(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  (void)data;
  if (info->dlpi_name && info->dlpi_name[0])
    dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  return 0;
}
#endif

/* In sanitized builds only: keeps the driver libraries the loader opened
 * for this context (lavapipe and its LLVM) loaded after it closes them, so
 * that LeakSanitizer sees what their globals still hold at exit. Mesa's
 * lavapipe on an AMD Zen 5 keeps a 128-byte realloc'd buffer in a global
 * it never frees; once the loader unloads the driver, LeakSanitizer
 * reported it as a leak from an unknown module, which no suppression can
 * name without also hiding leaks of JIT-compiled code. */
static void keep_drivers_loaded(void) {
#ifdef ATTNC_KEEP_DRIVERS
  dl_iterate_phdr(keep_loaded, NULL);
#endif
}

int attnc_vk_context_create(attnc_vk_context **out) {
  if (!out)
    return ATTNC_STATUS_NULL_ARGUMENT;
  *out = NULL;
  attnc_vk_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx)
    return ATTNC_STATUS_OUT_OF_MEMORY;
  int created = create_instance(ctx) && pick_device(ctx) &&
                create_device(ctx) && create_commands(ctx);
  keep_drivers_loaded();
  if (!created) {
    int status = ctx->error;
    attnc_vk_context_destroy(ctx);
    return status;
  }
  *out = ctx;
  return ATTNC_STATUS_OK;
}

/* ---- Buffers ---- */

/* Destroys a buffer and takes it off its context's list. */
static void free_buffer(attnc_vk_buffer *b) {
  attnc_vk_context *ctx = b->ctx;
  if (ctx->trap == b)
    ctx->trap = NULL;
  if (b->prev)
    b->prev->next = b->next;
  else
    ctx->buffers = b->next;
  if (b->next)
    b->next->prev = b->prev;
  if (b->buffer)
    ctx->vk.DestroyBuffer(ctx->device, b->buffer, NULL);
  if (b->memory) /* unmaps it too */
    ctx->vk.FreeMemory(ctx->device, b->memory, NULL);
  free(b);
}

attnc_vk_buffer *attnc_vk_buffer_create(attnc_vk_context *ctx, uint64_t bytes) {
  if (!ctx || bytes == 0)
    return NULL;
  attnc_vk_buffer *b = calloc(1, sizeof *b);
  if (!b)
    return NULL;
  b->ctx = ctx;
  b->size = bytes;
  b->next = ctx->buffers;
  if (b->next)
    b->next->prev = b;
  ctx->buffers = b;
  VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = bytes,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  VkBuffer buffer;
  if (ctx->vk.CreateBuffer(ctx->device, &info, NULL, &buffer) != VK_SUCCESS) {
    free_buffer(b);
    return NULL;
  }
  b->buffer = buffer;
  VkMemoryRequirements need;
  ctx->vk.GetBufferMemoryRequirements(ctx->device, b->buffer, &need);
  /* Device-local and host-visible where such memory exists (and has room),
   * else host-visible only. */
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                     VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags wanted[2] = {
      host | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, host};
  VkResult r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  for (int w = 0; w < 2 && r != VK_SUCCESS; ++w)
    for (uint32_t i = 0; i < ctx->memory.memoryTypeCount; ++i) {
      VkMemoryPropertyFlags flags = ctx->memory.memoryTypes[i].propertyFlags;
      if (!(need.memoryTypeBits & (1u << i)) ||
          (flags & wanted[w]) != wanted[w])
        continue;
      VkMemoryAllocateInfo alloc = {.sType =
                                        VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                    .allocationSize = need.size,
                                    .memoryTypeIndex = i};
      r = ctx->vk.AllocateMemory(ctx->device, &alloc, NULL, &memory);
      break;
    }
  if (r == VK_SUCCESS)
    b->memory = memory;
  if (r != VK_SUCCESS ||
      ctx->vk.BindBufferMemory(ctx->device, buffer, memory, 0) != VK_SUCCESS ||
      ctx->vk.MapMemory(ctx->device, b->memory, 0, VK_WHOLE_SIZE, 0,
                        &b->data) != VK_SUCCESS) {
    free_buffer(b);
    return NULL;
  }
  return b;
}

/* ---- Submission ---- */

/* Ends the recorded work and submits it (after an error, discards it, so
 * that a failed kernel writes nothing), waits for it, then destroys the
 * released buffers and resets the descriptor pools. */
static void flush(attnc_vk_context *ctx) {
  if (ctx->recording) {
    ctx->recording = 0;
    VkResult r = ctx->vk.EndCommandBuffer(ctx->commands);
    if (r == VK_SUCCESS && ctx->error == ATTNC_STATUS_OK) {
      VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                             .commandBufferCount = 1,
                             .pCommandBuffers = &ctx->commands};
      r = ctx->vk.QueueSubmit(ctx->queue, 1, &submit, ctx->fence);
      if (r == VK_SUCCESS) {
        r = ctx->vk.WaitForFences(ctx->device, 1, &ctx->fence, VK_TRUE,
                                  UINT64_MAX);
        ctx->vk.ResetFences(ctx->device, 1, &ctx->fence);
      }
    }
    ok(ctx, r);
    /* A kernel whose loops the device cut short said so in the trap. */
    if (ctx->trap && *(volatile uint32_t *)ctx->trap->data != 0) {
      *(volatile uint32_t *)ctx->trap->data = 0;
      fail(ctx, ATTNC_STATUS_DEVICE_LIMIT);
    }
    ctx->vk.ResetCommandPool(ctx->device, ctx->command_pool, 0);
  }
  for (attnc_vk_buffer *b = ctx->buffers, *next; b && ctx->releases; b = next) {
    next = b->next;
    if (b->released) {
      free_buffer(b);
      --ctx->releases;
    }
  }
  ctx->releases = 0;
  for (int i = 0; i < ctx->pool_count; ++i)
    ctx->vk.ResetDescriptorPool(ctx->device, ctx->pools[i], 0);
  ctx->pool_current = 0;
}

void attnc_vk_buffer_destroy(attnc_vk_buffer *buffer) {
  if (!buffer)
    return;
  /* Recorded work may use it: run that first. */
  if (buffer->ctx->recording)
    flush(buffer->ctx);
  if (buffer->released)
    --buffer->ctx->releases;
  free_buffer(buffer);
}

uint64_t attnc_vk_buffer_size(const attnc_vk_buffer *buffer) {
  return buffer ? buffer->size : 0;
}

int attnc_vk_upload(attnc_vk_buffer *dst, const void *src, uint64_t bytes) {
  if (!dst || (!src && bytes))
    return ATTNC_STATUS_NULL_ARGUMENT;
  if (bytes > dst->size)
    return ATTNC_STATUS_BAD_BUFFER;
  if (dst->ctx->recording)
    flush(dst->ctx);
  if (bytes)
    memcpy(dst->data, src, bytes);
  return ATTNC_STATUS_OK;
}

int attnc_vk_download(const attnc_vk_buffer *src, void *dst, uint64_t bytes) {
  if (!src || (!dst && bytes))
    return ATTNC_STATUS_NULL_ARGUMENT;
  if (bytes > src->size)
    return ATTNC_STATUS_BAD_BUFFER;
  if (src->ctx->recording)
    flush(src->ctx);
  if (bytes)
    memcpy(dst, src->data, bytes);
  return ATTNC_STATUS_OK;
}

int attnc_vk_finish(attnc_vk_context *ctx) {
  if (!ctx)
    return ATTNC_STATUS_NULL_ARGUMENT;
  flush(ctx);
  int status = ctx->error;
  ctx->error = ATTNC_STATUS_OK;
  return status;
}

/* ---- Dispatch ---- */

/* The cached shader module of a SPIR-V blob, created on first use. */
static VkShaderModule get_module(attnc_vk_context *ctx, const uint32_t *spirv,
                                 uint64_t words) {
  for (int i = 0; i < ctx->module_count; ++i)
    if (ctx->modules[i].spirv == spirv && ctx->modules[i].words == words)
      return ctx->modules[i].module;
  /* Not SPIR-V: a compiler bug. */
  if (!spirv || words < 5 || spirv[0] != ATTNC_VK_SPIRV_MAGIC ||
      words > SIZE_MAX / 4) {
    fail(ctx, ATTNC_STATUS_INTERNAL);
    return VK_NULL_HANDLE;
  }
  module_t *modules = attnc_reserve(ctx->modules, &ctx->module_capacity,
                                    ctx->module_count, sizeof *modules);
  if (!modules) {
    fail(ctx, ATTNC_STATUS_OUT_OF_MEMORY);
    return VK_NULL_HANDLE;
  }
  ctx->modules = modules;
  VkShaderModuleCreateInfo info = {
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
      .codeSize = (size_t)words * 4,
      .pCode = spirv};
  VkShaderModule module;
  if (!ok(ctx, ctx->vk.CreateShaderModule(ctx->device, &info, NULL, &module)))
    return VK_NULL_HANDLE;
  ctx->modules[ctx->module_count++] = (module_t){spirv, words, module};
  return module;
}

/* The cached pipeline of an entry point with `count` storage buffers at set
 * 0, bindings 0..count-1, created on first use; null after an error. */
static pipeline_t *get_pipeline(attnc_vk_context *ctx, const uint32_t *spirv,
                                uint64_t words, const char *entry,
                                uint32_t count) {
  for (int i = 0; i < ctx->pipeline_count; ++i) {
    pipeline_t *p = &ctx->pipelines[i];
    if (p->spirv == spirv && p->words == words && p->count == count &&
        strcmp(p->entry, entry) == 0)
      return p;
  }
  VkShaderModule module = get_module(ctx, spirv, words);
  if (module == VK_NULL_HANDLE)
    return NULL;
  pipeline_t *pipelines = attnc_reserve(ctx->pipelines, &ctx->pipeline_capacity,
                                        ctx->pipeline_count, sizeof *pipelines);
  if (pipelines)
    ctx->pipelines = pipelines;
  size_t length = strlen(entry) + 1;
  pipeline_t p = {
      spirv,         words,          pipelines ? malloc(length) : NULL,
      count,         VK_NULL_HANDLE, VK_NULL_HANDLE,
      VK_NULL_HANDLE};
  if (!p.entry) {
    fail(ctx, ATTNC_STATUS_OUT_OF_MEMORY);
    return NULL;
  }
  memcpy(p.entry, entry, length);
  VkDescriptorSetLayoutBinding bindings[ATTNC_VK_MAX_BUFFERS];
  for (uint32_t i = 0; i < count; ++i)
    bindings[i] = (VkDescriptorSetLayoutBinding){
        .binding = i,
        .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
        .descriptorCount = 1,
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  VkDescriptorSetLayoutCreateInfo set_info = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .bindingCount = count,
      .pBindings = bindings};
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  if (ok(ctx, ctx->vk.CreateDescriptorSetLayout(ctx->device, &set_info, NULL,
                                                &set_layout))) {
    p.set_layout = set_layout;
    VkPipelineLayoutCreateInfo layout_info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &set_layout};
    if (ok(ctx, ctx->vk.CreatePipelineLayout(ctx->device, &layout_info, NULL,
                                             &layout))) {
      p.layout = layout;
      VkComputePipelineCreateInfo info = {
          .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
          .stage = {.sType =
                        VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                    .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                    .module = module,
                    .pName = p.entry},
          .layout = layout};
      if (ok(ctx, ctx->vk.CreateComputePipelines(ctx->device, VK_NULL_HANDLE, 1,
                                                 &info, NULL, &pipeline)))
        p.pipeline = pipeline;
    }
  }
  if (!p.pipeline) {
    if (p.layout)
      ctx->vk.DestroyPipelineLayout(ctx->device, p.layout, NULL);
    if (p.set_layout)
      ctx->vk.DestroyDescriptorSetLayout(ctx->device, p.set_layout, NULL);
    free(p.entry);
    return NULL;
  }
  ctx->pipelines[ctx->pipeline_count] = p;
  return &ctx->pipelines[ctx->pipeline_count++];
}

/* A descriptor set of `layout` from the context's pools, adding a pool when
 * they are full; VK_NULL_HANDLE after an error. */
static VkDescriptorSet allocate_set(attnc_vk_context *ctx,
                                    VkDescriptorSetLayout layout,
                                    uint32_t count) {
  for (;;) {
    int fresh = ctx->pool_current == ctx->pool_count;
    if (fresh) {
      VkDescriptorPool *pools = attnc_reserve(ctx->pools, &ctx->pool_capacity,
                                              ctx->pool_count, sizeof *pools);
      if (!pools) {
        fail(ctx, ATTNC_STATUS_OUT_OF_MEMORY);
        return VK_NULL_HANDLE;
      }
      ctx->pools = pools;
      VkDescriptorPool pool;
      uint32_t descriptors = 8 * ATTNC_VK_POOL_SETS;
      VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                   count > descriptors ? count : descriptors};
      VkDescriptorPoolCreateInfo info = {
          .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
          .maxSets = ATTNC_VK_POOL_SETS,
          .poolSizeCount = 1,
          .pPoolSizes = &size};
      if (!ok(ctx,
              ctx->vk.CreateDescriptorPool(ctx->device, &info, NULL, &pool)))
        return VK_NULL_HANDLE;
      ctx->pools[ctx->pool_count++] = pool;
    }
    VkDescriptorSetAllocateInfo info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = ctx->pools[ctx->pool_current],
        .descriptorSetCount = 1,
        .pSetLayouts = &layout};
    VkDescriptorSet set;
    VkResult r = ctx->vk.AllocateDescriptorSets(ctx->device, &info, &set);
    if (r == VK_SUCCESS)
      return set;
    /* A full pool: go on with the next one, unless it was a new one. */
    if (fresh ||
        (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)) {
      fail(ctx, vk_status(r));
      return VK_NULL_HANDLE;
    }
    ++ctx->pool_current;
  }
}

void attnc_vk_dispatch(attnc_vk_context *ctx, const uint32_t *spirv,
                       uint64_t words, const char *entry, uint32_t groups_x,
                       uint32_t groups_y, uint32_t groups_z, uint32_t count,
                       attnc_vk_buffer *const *buffers, const uint64_t *bytes) {
  if (!ctx || ctx->error != ATTNC_STATUS_OK)
    return;
  /* An empty grid (an empty tensor, whose buffers may be null) does nothing. */
  if (groups_x == 0 || groups_y == 0 || groups_z == 0)
    return;
  const VkPhysicalDeviceLimits *limits = &ctx->props.limits;
  if (groups_x > limits->maxComputeWorkGroupCount[0] ||
      groups_y > limits->maxComputeWorkGroupCount[1] ||
      groups_z > limits->maxComputeWorkGroupCount[2]) {
    fail(ctx, ATTNC_STATUS_BAD_SIZE);
    return;
  }
  /* More buffers than the device can bind to one shader. */
  if (count > ATTNC_VK_MAX_BUFFERS ||
      count > limits->maxPerStageDescriptorStorageBuffers) {
    fail(ctx, ATTNC_STATUS_DEVICE_ERROR);
    return;
  }
  if (!entry) { /* a compiler bug */
    fail(ctx, ATTNC_STATUS_INTERNAL);
    return;
  }
  VkDescriptorBufferInfo infos[ATTNC_VK_MAX_BUFFERS];
  VkWriteDescriptorSet writes[ATTNC_VK_MAX_BUFFERS];
  for (uint32_t i = 0; i < count; ++i) {
    attnc_vk_buffer *b = buffers ? buffers[i] : NULL;
    uint64_t need = bytes ? bytes[i] : 0;
    if (!b || b->ctx != ctx || b->size < need) {
      fail(ctx, ATTNC_STATUS_BAD_BUFFER);
      return;
    }
    /* A shader sees at most maxStorageBufferRange bytes of a binding. */
    if (need > limits->maxStorageBufferRange) {
      fail(ctx, ATTNC_STATUS_BAD_SIZE);
      return;
    }
    infos[i] = (VkDescriptorBufferInfo){b->buffer, 0,
                                        b->size <= limits->maxStorageBufferRange
                                            ? VK_WHOLE_SIZE
                                            : limits->maxStorageBufferRange};
  }
  pipeline_t *p = get_pipeline(ctx, spirv, words, entry, count);
  if (!p)
    return;
  VkDescriptorSet set = VK_NULL_HANDLE;
  if (count > 0) {
    set = allocate_set(ctx, p->set_layout, count);
    if (set == VK_NULL_HANDLE)
      return;
    for (uint32_t i = 0; i < count; ++i)
      writes[i] = (VkWriteDescriptorSet){
          .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
          .dstSet = set,
          .dstBinding = i,
          .descriptorCount = 1,
          .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
          .pBufferInfo = &infos[i]};
    ctx->vk.UpdateDescriptorSets(ctx->device, count, writes, 0, NULL);
  }
  if (!ctx->recording) {
    VkCommandBufferBeginInfo begin = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    if (!ok(ctx, ctx->vk.BeginCommandBuffer(ctx->commands, &begin)))
      return;
    ctx->recording = 1;
  }
  ctx->vk.CmdBindPipeline(ctx->commands, VK_PIPELINE_BIND_POINT_COMPUTE,
                          p->pipeline);
  if (count > 0)
    ctx->vk.CmdBindDescriptorSets(ctx->commands, VK_PIPELINE_BIND_POINT_COMPUTE,
                                  p->layout, 0, 1, &set, 0, NULL);
  ctx->vk.CmdDispatch(ctx->commands, groups_x, groups_y, groups_z);
  /* Later dispatches, and the host after the fence, see this one's writes
   * (and do not overwrite what it reads before it has run). */
  VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                             .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                             .dstAccessMask = VK_ACCESS_SHADER_READ_BIT |
                                              VK_ACCESS_SHADER_WRITE_BIT |
                                              VK_ACCESS_HOST_READ_BIT};
  ctx->vk.CmdPipelineBarrier(
      ctx->commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
      &barrier, 0, NULL, 0, NULL);
}

attnc_vk_buffer *attnc_vk_trap(attnc_vk_context *ctx) {
  if (!ctx || ctx->error != ATTNC_STATUS_OK)
    return NULL;
  if (!ctx->trap) {
    ctx->trap = attnc_vk_buffer_create(ctx, sizeof(uint32_t));
    if (!ctx->trap) {
      fail(ctx, ATTNC_STATUS_OUT_OF_MEMORY);
      return NULL;
    }
    *(uint32_t *)ctx->trap->data = 0;
  }
  return ctx->trap;
}

attnc_vk_buffer *attnc_vk_scratch(attnc_vk_context *ctx, uint64_t bytes) {
  if (!ctx || ctx->error != ATTNC_STATUS_OK || bytes == 0)
    return NULL;
  attnc_vk_buffer *b = attnc_vk_buffer_create(ctx, bytes);
  if (!b)
    fail(ctx, ATTNC_STATUS_OUT_OF_MEMORY);
  return b;
}

void attnc_vk_release(attnc_vk_context *ctx, attnc_vk_buffer *buffer) {
  if (!ctx || !buffer || buffer->released)
    return;
  if (buffer->ctx != ctx) {
    fail(ctx, ATTNC_STATUS_BAD_BUFFER);
    return;
  }
  buffer->released = 1;
  ++ctx->releases;
}

/* ---- Queries and teardown ---- */

const char *attnc_vk_device_name(const attnc_vk_context *ctx) {
  return ctx ? ctx->props.deviceName : "";
}

uint32_t attnc_vk_subgroup_size(const attnc_vk_context *ctx) {
  return ctx ? ctx->subgroup_size : 0;
}

void attnc_vk_context_destroy(attnc_vk_context *ctx) {
  if (!ctx)
    return;
  if (ctx->device) {
    /* Work recorded but never finished is dropped with the pool. */
    if (ctx->recording)
      ctx->vk.EndCommandBuffer(ctx->commands);
    ctx->vk.DeviceWaitIdle(ctx->device);
    while (ctx->buffers)
      free_buffer(ctx->buffers);
    for (int i = 0; i < ctx->pipeline_count; ++i) {
      pipeline_t *p = &ctx->pipelines[i];
      ctx->vk.DestroyPipeline(ctx->device, p->pipeline, NULL);
      ctx->vk.DestroyPipelineLayout(ctx->device, p->layout, NULL);
      ctx->vk.DestroyDescriptorSetLayout(ctx->device, p->set_layout, NULL);
      free(p->entry);
    }
    for (int i = 0; i < ctx->module_count; ++i)
      ctx->vk.DestroyShaderModule(ctx->device, ctx->modules[i].module, NULL);
    for (int i = 0; i < ctx->pool_count; ++i)
      ctx->vk.DestroyDescriptorPool(ctx->device, ctx->pools[i], NULL);
    if (ctx->fence)
      ctx->vk.DestroyFence(ctx->device, ctx->fence, NULL);
    if (ctx->command_pool) /* frees the command buffer too */
      ctx->vk.DestroyCommandPool(ctx->device, ctx->command_pool, NULL);
    ctx->vk.DestroyDevice(ctx->device, NULL);
  }
  if (ctx->instance)
    ctx->vk.DestroyInstance(ctx->instance, NULL);
  if (ctx->library)
    dlclose(ctx->library);
  free(ctx->pipelines);
  free(ctx->modules);
  free(ctx->pools);
  free(ctx);
}
