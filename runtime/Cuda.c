/* The CUDA part of the attnc runtime (see cuda.h).
 *
 * libcuda is not linked, and cuda.h is not included: each context dlopens
 * libcuda.so.1 (not libcuda.so, which on a machine with the toolkit is often
 * its stub) and resolves the driver functions it uses with dlsym into its
 * own table, so that the runtime builds without CUDA and programs built
 * with it start on machines without a driver and get
 * ATTNC_STATUS_NO_DEVICE there. The few driver types and constants used are
 * declared below, with cuda.h's values.
 *
 * A context retains its device's primary context and pushes it around each
 * driver call. Modules are loaded once per image (a static of the kernel
 * object, keyed by its address) and functions looked up once per (image,
 * name), both cached for the context's lifetime.
 *
 * A context is used by one host thread at a time: nothing here locks. */
#include "attnc/cuda.h"
#include "Reserve.h"
#include "attnc/runtime.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The driver API, as far as it is used ---- */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef attnc_cuda_stream CUstream;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
};

/* Dynamic shared memory a kernel may use without opting in. */
#define ATTNC_CUDA_DEFAULT_SHARED (48u * 1024u)
/* Kernel parameters passed without a heap allocation. */
#define ATTNC_CUDA_STACK_PARAMS 64

/* The functions a context resolves, as X(field, symbol, parameters); all
 * return a CUresult. The optional ones may be missing (older drivers). */
/* clang-format off */
#define ATTNC_CU_REQUIRED(X)                                                   \
  X(Init, "cuInit", (unsigned))                                                \
  X(DeviceGet, "cuDeviceGet", (CUdevice *, int))                               \
  X(DeviceGetCount, "cuDeviceGetCount", (int *))                               \
  X(DeviceGetName, "cuDeviceGetName", (char *, int, CUdevice))                 \
  X(DeviceGetAttribute, "cuDeviceGetAttribute", (int *, int, CUdevice))        \
  X(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *, CUdevice))     \
  X(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice))             \
  X(CtxPushCurrent, "cuCtxPushCurrent_v2", (CUcontext))                        \
  X(CtxPopCurrent, "cuCtxPopCurrent_v2", (CUcontext *))                        \
  X(CtxSynchronize, "cuCtxSynchronize", (void))                                \
  X(MemAlloc, "cuMemAlloc_v2", (CUdeviceptr *, size_t))                        \
  X(MemFree, "cuMemFree_v2", (CUdeviceptr))                                    \
  X(MemcpyHtoD, "cuMemcpyHtoD_v2", (CUdeviceptr, const void *, size_t))        \
  X(MemcpyDtoH, "cuMemcpyDtoH_v2", (void *, CUdeviceptr, size_t))              \
  X(StreamSynchronize, "cuStreamSynchronize", (CUstream))                      \
  X(ModuleLoadDataEx, "cuModuleLoadDataEx",                                    \
    (CUmodule *, const void *, unsigned, int *, void **))                      \
  X(ModuleGetFunction, "cuModuleGetFunction",                                  \
    (CUfunction *, CUmodule, const char *))                                    \
  X(ModuleUnload, "cuModuleUnload", (CUmodule))                                \
  X(FuncSetAttribute, "cuFuncSetAttribute", (CUfunction, int, int))            \
  X(LaunchKernel, "cuLaunchKernel",                                            \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,   \
     unsigned, CUstream, void **, void **))
#define ATTNC_CU_OPTIONAL(X)                                                   \
  X(GetErrorName, "cuGetErrorName", (CUresult, const char **))                 \
  X(GetErrorString, "cuGetErrorString", (CUresult, const char **))             \
  X(MemAllocAsync, "cuMemAllocAsync", (CUdeviceptr *, size_t, CUstream))       \
  X(MemFreeAsync, "cuMemFreeAsync", (CUdeviceptr, CUstream))
/* clang-format on */
#define ATTNC_CU_DECLARE(field, symbol, params) CUresult(*field) params;

typedef struct {
  ATTNC_CU_REQUIRED(ATTNC_CU_DECLARE)
  ATTNC_CU_OPTIONAL(ATTNC_CU_DECLARE)
} driver_t;

/* A loaded module, one per image. */
typedef struct {
  const void *image;
  CUmodule module;
} module_t;

/* A kernel function, one per (image, name). */
typedef struct {
  const void *image;
  char *name;
  CUfunction function;
  uint32_t shared; /* the dynamic shared memory it was allowed, above 48K */
} function_t;

struct attnc_cuda_context {
  void *library;   /* libcuda, dlopened by this context */
  int initialized; /* cuInit succeeded: libcuda stays loaded */
  driver_t cu;
  CUdevice device;
  CUcontext primary; /* retained */
  char name[256];
  int capability; /* major * 10 + minor */
  int pools;      /* cuMemAllocAsync and cuMemFreeAsync are usable */
  int error;      /* the first error since the last finish */
  char message[1024];
  module_t *modules;
  int module_count, module_capacity;
  function_t *functions;
  int function_count, function_capacity;
};

static _Thread_local char load_error[1024];

/* The status of a failed driver call. */
static int cu_status(CUresult r) {
  return r == CUDA_ERROR_OUT_OF_MEMORY ? ATTNC_STATUS_OUT_OF_MEMORY
                                       : ATTNC_STATUS_DEVICE_ERROR;
}

/* Describes the failure of `call` (with its driver result r, or without one
 * when r is CUDA_SUCCESS) as "call: NAME (description)" into the context's
 * message, unless an error is kept for finish (whose message stays). */
static void note(attnc_cuda_context *ctx, const char *call, CUresult r) {
  if (ctx->error != ATTNC_STATUS_OK)
    return;
  if (r == CUDA_SUCCESS) {
    snprintf(ctx->message, sizeof ctx->message, "%s", call);
    return;
  }
  const char *name = NULL, *text = NULL;
  if (!ctx->cu.GetErrorName || ctx->cu.GetErrorName(r, &name) != CUDA_SUCCESS)
    name = NULL;
  if (!ctx->cu.GetErrorString ||
      ctx->cu.GetErrorString(r, &text) != CUDA_SUCCESS)
    text = NULL;
  if (!name && r == CUDA_ERROR_STUB_LIBRARY) { /* whose names fail too */
    name = "CUDA_ERROR_STUB_LIBRARY";
    text = "the toolkit's stub libcuda, not a driver";
  }
  if (name && text)
    snprintf(ctx->message, sizeof ctx->message, "%s: %s (%s)", call, name,
             text);
  else
    snprintf(ctx->message, sizeof ctx->message, "%s: CUDA error %d", call, r);
}

/* Keeps the first error until the next finish, with its message; returns
 * 0. */
static int fail(attnc_cuda_context *ctx, int status, const char *call,
                CUresult r) {
  note(ctx, call, r);
  if (ctx->error == ATTNC_STATUS_OK)
    ctx->error = status;
  return 0;
}

/* Whether a driver call succeeded; if not, keeps its error. */
static int ok(attnc_cuda_context *ctx, const char *call, CUresult r) {
  return r == CUDA_SUCCESS || fail(ctx, cu_status(r), call, r);
}

/* The status a host helper returns for a driver call's result. */
static int host_status(attnc_cuda_context *ctx, const char *call, CUresult r) {
  if (r == CUDA_SUCCESS)
    return ATTNC_STATUS_OK;
  note(ctx, call, r);
  return cu_status(r);
}

/* Makes the primary context current (the caller's stays below it). */
static CUresult push(attnc_cuda_context *ctx) {
  return ctx->cu.CtxPushCurrent(ctx->primary);
}

static void pop(attnc_cuda_context *ctx) {
  CUcontext popped;
  ctx->cu.CtxPopCurrent(&popped);
}

/* The driver's view of a device pointer. */
static CUdeviceptr dptr(const void *p) { return (uintptr_t)p; }

/* ---- Context creation ---- */

/* Fails a creation step: the thread's load error, and `status`. */
static int load_failure(int status, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(load_error, sizeof load_error, format, args);
  va_end(args);
  return status;
}

/* The status of a failed driver call during creation. */
static int create_status(CUresult r) {
  switch (r) {
  case CUDA_ERROR_NO_DEVICE:
  case CUDA_ERROR_INVALID_DEVICE:
  case CUDA_ERROR_STUB_LIBRARY:
  case CUDA_ERROR_NOT_INITIALIZED:
    return ATTNC_STATUS_NO_DEVICE;
  default:
    return cu_status(r);
  }
}

/* Whether a creation step's driver call succeeded; if not, keeps its
 * status and message in the context. */
static int created(attnc_cuda_context *ctx, const char *call, CUresult r) {
  return r == CUDA_SUCCESS || fail(ctx, create_status(r), call, r);
}

/* Loads libcuda and resolves the driver functions. */
static int load_driver(attnc_cuda_context *ctx) {
  const char *path = getenv("ATTNC_CUDA_LIBRARY");
  if (!path || !*path)
    path = "libcuda.so.1";
  ctx->library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!ctx->library) {
    const char *why = dlerror();
    return load_failure(ATTNC_STATUS_NO_DEVICE, "cannot load %s: %s", path,
                        why ? why : "unknown error");
  }
  const char *missing = NULL;
#define ATTNC_CU_LOAD(field, symbol, params)                                   \
  ctx->cu.field = (CUresult(*) params)dlsym(ctx->library, symbol);
#define ATTNC_CU_LOAD_REQUIRED(field, symbol, params)                          \
  ATTNC_CU_LOAD(field, symbol, params)                                         \
  if (!ctx->cu.field && !missing)                                              \
    missing = symbol;
  ATTNC_CU_REQUIRED(ATTNC_CU_LOAD_REQUIRED)
  ATTNC_CU_OPTIONAL(ATTNC_CU_LOAD)
#undef ATTNC_CU_LOAD_REQUIRED
#undef ATTNC_CU_LOAD
  if (missing)
    return load_failure(ATTNC_STATUS_NO_DEVICE, "%s has no %s", path, missing);
  return ATTNC_STATUS_OK;
}

/* Initializes the driver, retains the device's primary context and reads
 * the device's name and capabilities. */
static int open_device(attnc_cuda_context *ctx, int device) {
  CUresult r = ctx->cu.Init(0);
  if (r != CUDA_SUCCESS) { /* no driver behind the library, or a stub */
    note(ctx, "cuInit", r);
    return load_failure(r == CUDA_ERROR_OUT_OF_MEMORY
                            ? ATTNC_STATUS_OUT_OF_MEMORY
                            : ATTNC_STATUS_NO_DEVICE,
                        "%s", ctx->message);
  }
  ctx->initialized = 1;
  int count = 0, major = 0, minor = 0, pools = 0;
  CUcontext primary = NULL;
  if (!created(ctx, "cuDeviceGetCount", ctx->cu.DeviceGetCount(&count)))
    return load_failure(ctx->error, "%s", ctx->message);
  if (device < 0 || device >= count)
    return load_failure(ATTNC_STATUS_NO_DEVICE,
                        "no CUDA device %d (the driver has %d)", device, count);
  if (!created(ctx, "cuDeviceGet", ctx->cu.DeviceGet(&ctx->device, device)) ||
      !created(ctx, "cuDeviceGetName",
               ctx->cu.DeviceGetName(ctx->name, (int)sizeof ctx->name,
                                     ctx->device)) ||
      !created(ctx, "cuDeviceGetAttribute",
               ctx->cu.DeviceGetAttribute(
                   &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                   ctx->device)) ||
      !created(ctx, "cuDeviceGetAttribute",
               ctx->cu.DeviceGetAttribute(
                   &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                   ctx->device)) ||
      !created(ctx, "cuDevicePrimaryCtxRetain",
               ctx->cu.PrimaryCtxRetain(&primary, ctx->device)))
    return load_failure(ctx->error, "%s", ctx->message);
  ctx->primary = primary;
  /* Older drivers do not know the attribute: no pools then. */
  if (ctx->cu.DeviceGetAttribute(&pools,
                                 CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                 ctx->device) != CUDA_SUCCESS)
    pools = 0;
  ctx->name[sizeof ctx->name - 1] = '\0';
  ctx->capability = major * 10 + minor;
  ctx->pools = pools && ctx->cu.MemAllocAsync && ctx->cu.MemFreeAsync;
  return ATTNC_STATUS_OK;
}

int attnc_cuda_context_create(int device, attnc_cuda_context **out) {
  load_error[0] = '\0';
  if (!out)
    return load_failure(ATTNC_STATUS_NULL_ARGUMENT, "null output pointer");
  *out = NULL;
  attnc_cuda_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx)
    return load_failure(ATTNC_STATUS_OUT_OF_MEMORY, "out of memory");
  int status = load_driver(ctx);
  if (status == ATTNC_STATUS_OK)
    status = open_device(ctx, device);
  if (status != ATTNC_STATUS_OK) {
    attnc_cuda_context_destroy(ctx);
    return status;
  }
  *out = ctx;
  return ATTNC_STATUS_OK;
}

/* ---- Queries and teardown ---- */

const char *attnc_cuda_device_name(const attnc_cuda_context *ctx) {
  return ctx ? ctx->name : "";
}

int attnc_cuda_compute_capability(const attnc_cuda_context *ctx) {
  return ctx ? ctx->capability : 0;
}

const char *attnc_cuda_last_error(const attnc_cuda_context *ctx) {
  return ctx ? ctx->message : "";
}

const char *attnc_cuda_load_error(void) { return load_error; }

void attnc_cuda_context_destroy(attnc_cuda_context *ctx) {
  if (!ctx)
    return;
  if (ctx->primary) {
    /* Kernels still running may use the modules. */
    if (push(ctx) == CUDA_SUCCESS) {
      ctx->cu.CtxSynchronize();
      for (int i = 0; i < ctx->module_count; ++i)
        ctx->cu.ModuleUnload(ctx->modules[i].module);
      pop(ctx);
    }
    ctx->cu.PrimaryCtxRelease(ctx->device);
  }
  /* Once initialized, the driver may have threads running its code: it
   * stays loaded (dlopen counts; nothing leaks). */
  if (ctx->library && !ctx->initialized)
    dlclose(ctx->library);
  for (int i = 0; i < ctx->function_count; ++i)
    free(ctx->functions[i].name);
  free(ctx->functions);
  free(ctx->modules);
  free(ctx);
}

/* ---- Host helpers ---- */

void *attnc_cuda_alloc(attnc_cuda_context *ctx, uint64_t bytes) {
  if (!ctx || bytes == 0)
    return NULL;
  CUdeviceptr ptr = 0;
  const char *call = "cuCtxPushCurrent";
  CUresult r = push(ctx);
  if (r == CUDA_SUCCESS) {
    call = "cuMemAlloc";
    r = ctx->cu.MemAlloc(&ptr, bytes);
    pop(ctx);
  }
  host_status(ctx, call, r);
  return r == CUDA_SUCCESS ? (void *)(uintptr_t)ptr : NULL;
}

void attnc_cuda_free(attnc_cuda_context *ctx, void *device_ptr) {
  if (!ctx || !device_ptr)
    return;
  CUresult r = push(ctx);
  if (r != CUDA_SUCCESS) {
    host_status(ctx, "cuCtxPushCurrent", r);
    return;
  }
  host_status(ctx, "cuMemFree", ctx->cu.MemFree(dptr(device_ptr)));
  pop(ctx);
}

/* A blocking copy between host and device memory, either way. */
static int copy(attnc_cuda_context *ctx, void *dst, const void *src,
                uint64_t bytes, int to_device) {
  if (!ctx || ((!dst || !src) && bytes))
    return ATTNC_STATUS_NULL_ARGUMENT;
  if (bytes == 0)
    return ATTNC_STATUS_OK;
  CUresult r = push(ctx);
  if (r != CUDA_SUCCESS)
    return host_status(ctx, "cuCtxPushCurrent", r);
  r = to_device ? ctx->cu.MemcpyHtoD(dptr(dst), src, bytes)
                : ctx->cu.MemcpyDtoH(dst, dptr(src), bytes);
  pop(ctx);
  return host_status(ctx, to_device ? "cuMemcpyHtoD" : "cuMemcpyDtoH", r);
}

int attnc_cuda_upload(attnc_cuda_context *ctx, void *dst_device,
                      const void *src_host, uint64_t bytes) {
  return copy(ctx, dst_device, src_host, bytes, 1);
}

int attnc_cuda_download(attnc_cuda_context *ctx, void *dst_host,
                        const void *src_device, uint64_t bytes) {
  return copy(ctx, dst_host, src_device, bytes, 0);
}

int attnc_cuda_synchronize(attnc_cuda_context *ctx, attnc_cuda_stream stream) {
  if (!ctx)
    return ATTNC_STATUS_NULL_ARGUMENT;
  CUresult r = push(ctx);
  if (r != CUDA_SUCCESS)
    return host_status(ctx, "cuCtxPushCurrent", r);
  r = ctx->cu.StreamSynchronize(stream);
  pop(ctx);
  return host_status(ctx, "cuStreamSynchronize", r);
}

/* ---- Launches ---- */

/* The cached module of an image, loaded on first use (with the primary
 * context current); null after an error. PTX that does not compile has the
 * JIT's log in the message. */
static CUmodule get_module(attnc_cuda_context *ctx, const void *image) {
  for (int i = 0; i < ctx->module_count; ++i)
    if (ctx->modules[i].image == image)
      return ctx->modules[i].module;
  module_t *modules = attnc_reserve(ctx->modules, &ctx->module_capacity,
                                    ctx->module_count, sizeof *modules);
  if (!modules) {
    fail(ctx, ATTNC_STATUS_OUT_OF_MEMORY, "attnc_cuda_launch: out of memory",
         CUDA_SUCCESS);
    return NULL;
  }
  ctx->modules = modules;
  char log[512] = "";
  int options[2] = {CU_JIT_ERROR_LOG_BUFFER,
                    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[2] = {log, (void *)(uintptr_t)sizeof log};
  CUmodule module;
  CUresult r = ctx->cu.ModuleLoadDataEx(&module, image, 2, options, values);
  if (r != CUDA_SUCCESS) {
    log[sizeof log - 1] = '\0';
    fail(ctx, cu_status(r), "cuModuleLoadDataEx", r);
    size_t used = strlen(ctx->message);
    if (*log && used + 2 < sizeof ctx->message)
      snprintf(ctx->message + used, sizeof ctx->message - used, ": %s", log);
    return NULL;
  }
  ctx->modules[ctx->module_count++] = (module_t){image, module};
  return module;
}

/* The cached function `name` of an image, looked up on first use; null
 * after an error. */
static function_t *get_function(attnc_cuda_context *ctx, const void *image,
                                const char *name) {
  for (int i = 0; i < ctx->function_count; ++i) {
    function_t *f = &ctx->functions[i];
    if (f->image == image && strcmp(f->name, name) == 0)
      return f;
  }
  CUmodule module = get_module(ctx, image);
  if (!module)
    return NULL;
  function_t *functions = attnc_reserve(ctx->functions, &ctx->function_capacity,
                                        ctx->function_count, sizeof *functions);
  if (functions)
    ctx->functions = functions;
  size_t length = strlen(name) + 1;
  function_t f = {image, functions ? malloc(length) : NULL, NULL, 0};
  if (!f.name) {
    fail(ctx, ATTNC_STATUS_OUT_OF_MEMORY, "attnc_cuda_launch: out of memory",
         CUDA_SUCCESS);
    return NULL;
  }
  memcpy(f.name, name, length);
  CUfunction function;
  CUresult r = ctx->cu.ModuleGetFunction(&function, module, name);
  if (r != CUDA_SUCCESS) {
    char call[300];
    snprintf(call, sizeof call, "cuModuleGetFunction(%.256s)", name);
    fail(ctx, cu_status(r), call, r);
    free(f.name);
    return NULL;
  }
  f.function = function;
  ctx->functions[ctx->function_count] = f;
  return &ctx->functions[ctx->function_count++];
}

/* Queues the launch; the primary context is current. */
static void launch(attnc_cuda_context *ctx, attnc_cuda_stream stream,
                   const void *image, const char *kernel,
                   const uint32_t grid[3], const uint32_t block[3],
                   uint32_t shared_bytes, uint32_t count, void *const *args) {
  function_t *f = get_function(ctx, image, kernel);
  if (!f)
    return;
  /* More dynamic shared memory than the default: opt in (once per size). */
  if (shared_bytes > ATTNC_CUDA_DEFAULT_SHARED && shared_bytes > f->shared) {
    if (!ok(ctx, "cuFuncSetAttribute",
            ctx->cu.FuncSetAttribute(
                f->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                (int)shared_bytes)))
      return;
    f->shared = shared_bytes;
  }
  /* kernelParams[i] points at (a copy of: args is const) the i-th value;
   * the driver reads them before cuLaunchKernel returns. */
  void *stack_values[ATTNC_CUDA_STACK_PARAMS];
  void *stack_params[ATTNC_CUDA_STACK_PARAMS];
  void **values = stack_values, **params = stack_params;
  if (count > ATTNC_CUDA_STACK_PARAMS) {
    values = malloc(2 * (size_t)count * sizeof *values);
    if (!values) {
      fail(ctx, ATTNC_STATUS_OUT_OF_MEMORY, "attnc_cuda_launch: out of memory",
           CUDA_SUCCESS);
      return;
    }
    params = values + count;
  }
  for (uint32_t i = 0; i < count; ++i) {
    values[i] = args[i];
    params[i] = &values[i];
  }
  ok(ctx, "cuLaunchKernel",
     ctx->cu.LaunchKernel(f->function, grid[0], grid[1], grid[2], block[0],
                          block[1], block[2], shared_bytes, stream,
                          count ? params : NULL, NULL));
  if (values != stack_values)
    free(values);
}

void attnc_cuda_launch(attnc_cuda_context *ctx, attnc_cuda_stream stream,
                       const void *image, const char *kernel, uint32_t gx,
                       uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by,
                       uint32_t bz, uint32_t shared_bytes, uint32_t count,
                       void *const *args) {
  if (!ctx || ctx->error != ATTNC_STATUS_OK)
    return;
  /* An empty grid (an empty tensor, whose pointers may be null) does
   * nothing. */
  if (gx == 0 || gy == 0 || gz == 0)
    return;
  if (!image || !kernel || (count && !args)) { /* a compiler bug */
    fail(ctx, ATTNC_STATUS_INTERNAL,
         "attnc_cuda_launch: null image, kernel name or arguments",
         CUDA_SUCCESS);
    return;
  }
  if (!ok(ctx, "cuCtxPushCurrent", push(ctx)))
    return;
  const uint32_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  launch(ctx, stream, image, kernel, grid, block, shared_bytes, count, args);
  pop(ctx);
}

void *attnc_cuda_scratch(attnc_cuda_context *ctx, attnc_cuda_stream stream,
                         uint64_t bytes) {
  if (!ctx || ctx->error != ATTNC_STATUS_OK || bytes == 0)
    return NULL;
  if (!ok(ctx, "cuCtxPushCurrent", push(ctx)))
    return NULL;
  CUdeviceptr ptr = 0;
  int done = ctx->pools ? ok(ctx, "cuMemAllocAsync",
                             ctx->cu.MemAllocAsync(&ptr, bytes, stream))
                        : ok(ctx, "cuMemAlloc", ctx->cu.MemAlloc(&ptr, bytes));
  pop(ctx);
  return done ? (void *)(uintptr_t)ptr : NULL;
}

void attnc_cuda_release(attnc_cuda_context *ctx, attnc_cuda_stream stream,
                        void *ptr) {
  if (!ctx || !ptr || !ok(ctx, "cuCtxPushCurrent", push(ctx)))
    return;
  /* Without pools, the work queued so far may still use it: wait for it
   * (and free the memory even when that fails). */
  if (ctx->pools) {
    ok(ctx, "cuMemFreeAsync", ctx->cu.MemFreeAsync(dptr(ptr), stream));
  } else {
    ok(ctx, "cuStreamSynchronize", ctx->cu.StreamSynchronize(stream));
    ok(ctx, "cuMemFree", ctx->cu.MemFree(dptr(ptr)));
  }
  pop(ctx);
}

int attnc_cuda_finish(attnc_cuda_context *ctx) {
  if (!ctx)
    return ATTNC_STATUS_NULL_ARGUMENT;
  int status = ctx->error;
  ctx->error = ATTNC_STATUS_OK;
  return status;
}
