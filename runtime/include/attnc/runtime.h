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
  /* A workspace could not be allocated. */
  ATTNC_STATUS_OUT_OF_MEMORY = 3,
  /* An internal error of the compiler or runtime. */
  ATTNC_STATUS_INTERNAL = 4
} attnc_status;

/* A static, human-readable description of a status code. */
const char *attnc_status_string(int status);

#ifdef __cplusplus
}
#endif

#endif /* ATTNC_RUNTIME_H */
