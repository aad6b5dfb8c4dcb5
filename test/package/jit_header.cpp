// Built only when the installed package has attnc::attnc_jit: checks that its
// public header compiles from the install tree and the library links.
#include <attnc/jit.h>

int main() { return 0; }
