# cmake -DIN=converted.mlir -DOUT=module.mlir -P ExtractSpirvModule.cmake
#
# Writes the spirv.module that convert-gpu-to-spirv put next to the
# gpu.module of IN to OUT, alone, for mlir-translate --serialize-spirv
# --no-implicit-module (which wants a spirv.module as the top-level op).
# mlir-opt prints it at two spaces of indent, so it ends at the first line
# that is just "  }".
file(READ "${IN}" text)
string(FIND "${text}" "\n  spirv.module " begin)
if(begin EQUAL -1)
  message(FATAL_ERROR "${IN}: no spirv.module")
endif()
string(SUBSTRING "${text}" ${begin} -1 text)
string(FIND "${text}" "\n  }\n" end)
if(end EQUAL -1)
  message(FATAL_ERROR "${IN}: the spirv.module does not end")
endif()
math(EXPR end "${end} + 4")
string(SUBSTRING "${text}" 0 ${end} text)
file(WRITE "${OUT}" "${text}\n")
