# ctest package-consumer: cmake -DATTNC_BUILD_DIR=<build> -DATTNC_SOURCE_DIR=<src>
#   [-DATTNC_EXPECT_JIT=ON] [-DCONSUMER_C_COMPILER=...] [-DCONSUMER_CXX_COMPILER=...]
#   [-DCONSUMER_MAKE_PROGRAM=...] [-DCONSUMER_FLAGS="-fsanitize=..."]
#   -P run.cmake
# Installs the attnc build into <build>/package-test/prefix, checks the
# layout, then configures test/package/ against that prefix with Ninja in
# <build>/package-test/build, builds it and runs the consumer.
cmake_minimum_required(VERSION 3.20)
foreach(var ATTNC_BUILD_DIR ATTNC_SOURCE_DIR)
  if(NOT ${var})
    message(FATAL_ERROR "run.cmake needs -D${var}=...")
  endif()
endforeach()

set(work "${ATTNC_BUILD_DIR}/package-test")
set(prefix "${work}/prefix")
set(build "${work}/build")
file(REMOVE_RECURSE "${work}")

function(step name)
  message(STATUS "package-consumer: ${name}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package-consumer: ${name} failed (${rc})")
  endif()
endfunction()

step("install into ${prefix}"
  "${CMAKE_COMMAND}" --install "${ATTNC_BUILD_DIR}" --prefix "${prefix}")

set(expected
  bin/attnc bin/attnc-opt bin/attnc-lsp-server lib/libattnc_rt.a
  include/attnc/runtime.h
  lib/cmake/attnc/attncConfig.cmake lib/cmake/attnc/attncConfigVersion.cmake
  lib/cmake/attnc/attncTargets.cmake lib/cmake/attnc/AttncKernel.cmake)
if(ATTNC_EXPECT_JIT)
  list(APPEND expected lib/libattnc_jit.so include/attnc/jit.h)
endif()
foreach(f ${expected})
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "package-consumer: ${f} was not installed")
  endif()
endforeach()

# The installed tools must run from the prefix (libMLIR/libLLVM via RPATH).
step("installed attnc runs" "${prefix}/bin/attnc" --version)
step("installed attnc-opt runs" "${prefix}/bin/attnc-opt" --version)
step("installed attnc-lsp-server runs" "${prefix}/bin/attnc-lsp-server" --version)

set(configure_args -G Ninja -S "${ATTNC_SOURCE_DIR}/test/package" -B "${build}"
  -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${prefix}"
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
foreach(pair "CONSUMER_C_COMPILER;CMAKE_C_COMPILER"
             "CONSUMER_CXX_COMPILER;CMAKE_CXX_COMPILER"
             "CONSUMER_MAKE_PROGRAM;CMAKE_MAKE_PROGRAM")
  list(GET pair 0 from)
  list(GET pair 1 to)
  if(${from})
    list(APPEND configure_args "-D${to}=${${from}}")
  endif()
endforeach()
if(ATTNC_EXPECT_JIT)
  list(APPEND configure_args -DATTNC_EXPECT_JIT=ON)
endif()
# The sanitized build's libraries need the sanitizer runtimes in the
# consumer's link (and its own code gets checked too).
if(CONSUMER_FLAGS)
  list(APPEND configure_args "-DCMAKE_C_FLAGS=${CONSUMER_FLAGS}"
    "-DCMAKE_CXX_FLAGS=${CONSUMER_FLAGS}"
    "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_FLAGS}")
endif()
step("configure the consumer" "${CMAKE_COMMAND}" ${configure_args})

# It must have used the package just installed, not another one.
file(STRINGS "${build}/CMakeCache.txt" dir_line REGEX "^attnc_DIR:")
if(NOT dir_line STREQUAL "attnc_DIR:PATH=${prefix}/lib/cmake/attnc")
  message(FATAL_ERROR "package-consumer: found attnc at '${dir_line}', "
                      "not in ${prefix}")
endif()

step("build the consumer" "${CMAKE_COMMAND}" --build "${build}" -j 1)
step("run the consumer" "${build}/consumer")
if(ATTNC_EXPECT_JIT)
  # Its JIT cache stays in the test's folder.
  step("run examples/jit_host" "${CMAKE_COMMAND}" -E env
    "ATTNC_CACHE_DIR=${work}/jit-cache" "${build}/jit-host")
endif()
