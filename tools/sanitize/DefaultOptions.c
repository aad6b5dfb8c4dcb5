/* The sanitizer defaults of every executable of the sanitized build
 * (CMakeLists.txt adds this file to each one when ATTNC_SANITIZE is on), so
 * that a run without tools/sanitize/env.sh -- the kernels `attnc compile`s
 * at build time, gtest's test discovery, a developer's shell -- behaves as
 * CI's. ASAN_OPTIONS/UBSAN_OPTIONS/LSAN_OPTIONS given at run time still
 * override each option.
 *
 * allow_user_poisoning=0 is needed for correctness, not taste: llvm/Support/
 * Allocator.h poisons a BumpPtrAllocator's new slab and unpoisons each
 * allocation, but only in code compiled with ASan. attnc's code (inlined
 * allocator paths, e.g. a StorageUniquer's attribute storage) and Debian's
 * uninstrumented libMLIR share allocators, so a slab that attnc's code
 * poisoned hands out memory that libMLIR never unpoisons; its memcpy/memmove
 * (intercepted) then report use-after-poison on memory that is live. Seen:
 * DenseArrayAttrImpl::get copying into a slab that CpuPlanAttrStorage's
 * construction had made (KernelTest.AffineMaskRegions). Heap redzones,
 * use-after-free, stack and global checks are untouched; only manual
 * poisoning (the allocator's, which cannot be right in a mixed build) is off.
 *
 * Every report ends in SIGABRT (abort_on_error), not `exit 1`: lit's `not`
 * inverts exit statuses and would pass a test on an ASan report; it fails
 * on a signal. */

const char *__asan_default_options(void);
const char *__ubsan_default_options(void);
const char *__lsan_default_suppressions(void);

const char *__asan_default_options(void) {
  return "allow_user_poisoning=0:abort_on_error=1:halt_on_error=1:"
         "detect_leaks=1:check_initialization_order=1:strict_init_order=1";
}

const char *__ubsan_default_options(void) {
  return "abort_on_error=1:halt_on_error=1:print_stacktrace=1:"
         "report_error_type=1";
}

/* fontconfig (under cairo's text, in attnc explain) keeps its caches until
 * exit by design (FcFini would free them, but cairo may still hold fonts);
 * LeakSanitizer reports them as leaks of libfontconfig's own mallocs. Only
 * that library's allocations are suppressed. */
const char *__lsan_default_suppressions(void) {
  return "leak:libfontconfig.so\n";
}
