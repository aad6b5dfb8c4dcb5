/* Descriptions of the attnc status codes. */
#include "attnc/runtime.h"

const char *attnc_status_string(int status) {
  switch (status) {
  case ATTNC_STATUS_OK:
    return "ok";
  case ATTNC_STATUS_NULL_ARGUMENT:
    return "a tensor pointer was null";
  case ATTNC_STATUS_BAD_SIZE:
    return "a dynamic size was out of range";
  case ATTNC_STATUS_OUT_OF_MEMORY:
    return "out of memory";
  case ATTNC_STATUS_INTERNAL:
    return "internal error";
  case ATTNC_STATUS_NO_AMX:
    return "the OS did not grant this process AMX tile state";
  case ATTNC_STATUS_NO_DEVICE:
    return "no usable GPU (no Vulkan or CUDA driver, or no device)";
  case ATTNC_STATUS_DEVICE_ERROR:
    return "the GPU driver reported an error";
  case ATTNC_STATUS_BAD_BUFFER:
    return "a buffer is too small or belongs to another context";
  case ATTNC_STATUS_DEVICE_LIMIT:
    return "the device cut the kernel's loops short (lavapipe's limit of "
           "65535 loop iterations per invocation); its results are wrong";
  default:
    return "unknown status";
  }
}
