/* bench/gpu: linked into each prebuilt library by prepare.py. The runtime's
 * CUDA part loads libcuda with dlopen/dlsym; built against glibc 2.34 or later
 * these calls would need GLIBC_2.34, which older systems lack. Hidden
 * definitions here forward them to the GLIBC_2.2.5 versions, which every
 * x86-64 glibc has (in libdl.so.2 before 2.34, in libc.so.6 since), so the
 * libraries load wherever glibc is 2.14 or newer (memcpy's version). */
#define OLD(f) __asm__(".symver attnc_compat_old_" #f ", " #f "@GLIBC_2.2.5");
OLD(dlopen)
OLD(dlsym)
OLD(dlerror)
OLD(dlclose)

extern void *attnc_compat_old_dlopen(const char *file, int mode);
extern void *attnc_compat_old_dlsym(void *handle, const char *name);
extern char *attnc_compat_old_dlerror(void);
extern int attnc_compat_old_dlclose(void *handle);

#define HIDDEN __attribute__((visibility("hidden")))
HIDDEN void *dlopen(const char *file, int mode) {
  return attnc_compat_old_dlopen(file, mode);
}
HIDDEN void *dlsym(void *handle, const char *name) {
  return attnc_compat_old_dlsym(handle, name);
}
HIDDEN char *dlerror(void) { return attnc_compat_old_dlerror(); }
HIDDEN int dlclose(void *handle) { return attnc_compat_old_dlclose(handle); }
