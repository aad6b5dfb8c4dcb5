# Sourced (bash): the sanitizer run-time options for the sanitized build
# (build-san/): its ctest, lit and attnc-fuzz, as CI runs them.
#
# The binaries carry the same defaults (tools/sanitize/DefaultOptions.c:
# every report fatal and ending in SIGABRT, LeakSanitizer on, manual
# poisoning off and why); this spells them out for CI's log and adds what a
# binary cannot know: where llvm-symbolizer is (not on PATH in Debian's
# llvm-22 packages), for file:line stacks.
_attnc_symbolizer=/usr/lib/llvm-22/bin/llvm-symbolizer
export ASAN_OPTIONS="allow_user_poisoning=0:abort_on_error=1:halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:external_symbolizer_path=$_attnc_symbolizer"
export UBSAN_OPTIONS="abort_on_error=1:halt_on_error=1:print_stacktrace=1:report_error_type=1:external_symbolizer_path=$_attnc_symbolizer"
unset _attnc_symbolizer
