//===- Version.cpp - The runtime's version --------------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/zbrt.h"

extern "C" const char *zbrt_version(void) { return ZBRT_VERSION; }
