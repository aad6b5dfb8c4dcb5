/* Prints the size queries of examples/mha_causal.mlir's derived kernels. */
#include "mha_causal.h"
#include <stdio.h>
int main(void) {
  printf("saved %lld workspace %lld\n", (long long)mha_causal_saved_bytes(),
         (long long)mha_causal_workspace_bytes());
  return 0;
}
