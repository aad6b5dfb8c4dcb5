// The vector width of every CPU kernel: 16 f32 lanes, one AVX-512 register
// (two AVX2 or four SSE registers, which LLVM splits them into).
#ifndef ATTNC_CODEGEN_CPU_LANES_H
#define ATTNC_CODEGEN_CPU_LANES_H

#include <cstdint>

namespace attnc {

inline constexpr int64_t kLanes = 16;

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_LANES_H
