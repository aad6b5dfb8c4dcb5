# attnc_add_kernel(TARGET name SPEC file.mlir [OPTIONS ...]): compiles a spec
# at build time and links the object and its generated header into TARGET.
# The header is <spec stem>.h in a directory added to TARGET's include path.
#
# The same file serves the source tree and the installed package
# (lib/cmake/attnc, included by attncConfig.cmake). The compiler is
# ATTNC_COMPILER when set (the installed package sets it to its bin/attnc),
# else the in-tree `attnc` target, else the imported attnc::attnc. The
# runtime is the target attnc::attnc_rt: an alias in-tree, an imported
# target from the package.
function(attnc_add_kernel)
  cmake_parse_arguments(ARG "" "TARGET;SPEC" "OPTIONS" ${ARGN})
  if(NOT ARG_TARGET OR NOT ARG_SPEC)
    message(FATAL_ERROR "attnc_add_kernel needs TARGET and SPEC")
  endif()
  get_filename_component(spec "${ARG_SPEC}" ABSOLUTE)
  get_filename_component(stem "${spec}" NAME_WE)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/attnc_kernels/${ARG_TARGET}")
  set(ext "${CMAKE_C_OUTPUT_EXTENSION}")
  if(NOT ext)
    set(ext "${CMAKE_CXX_OUTPUT_EXTENSION}")
  endif()
  if(NOT ext)
    set(ext ".o")
  endif()
  set(object "${dir}/${stem}${ext}")
  set(header "${dir}/${stem}.h")
  if(ATTNC_COMPILER)
    set(compiler "${ATTNC_COMPILER}")
    # Rebuild the kernels when the (installed) compiler changes.
    set(compiler_dep "${ATTNC_COMPILER}")
  elseif(TARGET attnc)
    set(compiler $<TARGET_FILE:attnc>)
    set(compiler_dep attnc)
  elseif(TARGET attnc::attnc)
    set(compiler $<TARGET_FILE:attnc::attnc>)
  else()
    message(FATAL_ERROR "attnc_add_kernel: no attnc compiler; set "
                        "ATTNC_COMPILER or find_package(attnc)")
  endif()
  add_custom_command(
    OUTPUT "${object}" "${header}"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${dir}"
    COMMAND ${compiler} compile "${spec}" -o "${object}"
            --emit-header "${header}" ${ARG_OPTIONS}
    DEPENDS "${spec}" ${compiler_dep}
    COMMENT "attnc compile ${stem}"
    VERBATIM)
  set_source_files_properties("${object}" PROPERTIES
    EXTERNAL_OBJECT TRUE GENERATED TRUE)
  target_sources(${ARG_TARGET} PRIVATE "${object}" "${header}")
  target_include_directories(${ARG_TARGET} PRIVATE "${dir}")
  target_link_libraries(${ARG_TARGET} PRIVATE attnc::attnc_rt m)
endfunction()
