// Regression: a kernel without tensors is declared with a (void) prototype.
// RUN: rm -rf %t && mkdir -p %t
// RUN: attnc compile %s -o %t/nothing.o --emit-header %t/nothing.h
// RUN: FileCheck %s < %t/nothing.h
// RUN: %cc -std=c99 -Wall -Werror -Wstrict-prototypes -fsyntax-only -x c %t/nothing.h
// CHECK: int32_t nothing(void);

func.func @nothing() {
  return
}
