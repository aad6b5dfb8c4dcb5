# attnc_add_kernel(TARGET name SPEC file.mlir [OPTIONS ...]): compiles a spec
# at build time and links the object and its generated header into TARGET.
# The header is <spec stem>.h in a directory added to TARGET's include path.
function(attnc_add_kernel)
  cmake_parse_arguments(ARG "" "TARGET;SPEC" "OPTIONS" ${ARGN})
  if(NOT ARG_TARGET OR NOT ARG_SPEC)
    message(FATAL_ERROR "attnc_add_kernel needs TARGET and SPEC")
  endif()
  get_filename_component(spec "${ARG_SPEC}" ABSOLUTE)
  get_filename_component(stem "${spec}" NAME_WE)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/attnc_kernels/${ARG_TARGET}")
  set(object "${dir}/${stem}${CMAKE_C_OUTPUT_EXTENSION}")
  set(header "${dir}/${stem}.h")
  if(NOT ATTNC_COMPILER)
    set(ATTNC_COMPILER $<TARGET_FILE:attnc>)
    set(compiler_dep attnc)
  endif()
  add_custom_command(
    OUTPUT "${object}" "${header}"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${dir}"
    COMMAND ${ATTNC_COMPILER} compile "${spec}" -o "${object}"
            --emit-header "${header}" ${ARG_OPTIONS}
    DEPENDS "${spec}" ${compiler_dep}
    COMMENT "attnc compile ${stem}"
    VERBATIM)
  target_sources(${ARG_TARGET} PRIVATE "${object}" "${header}")
  target_include_directories(${ARG_TARGET} PRIVATE "${dir}")
  target_link_libraries(${ARG_TARGET} PRIVATE attnc_rt m)
endfunction()
