# One precompiled header of the MLIR and LLVM headers most translation units
# of the project include: parsing them is most of a unit's compile time (a
# pass of lib/Conversion compiles in about two thirds of the time with it).
# The target ZBPrecompiledHeaders builds it once; zb_precompile_headers(T)
# makes T's units use it. Every such target has the project's MLIR compile
# flags, so the one header is valid for all of them (a unit for which the
# compiler finds it invalid parses the headers as written, with a
# -Winvalid-pch warning).
option(ZB_PRECOMPILED_HEADERS
  "Precompile the most used MLIR headers once for the project's libraries" ON)

if(ZB_PRECOMPILED_HEADERS)
  set(_zb_pch_source ${CMAKE_BINARY_DIR}/ZBPrecompiledHeaders.cpp)
  if(NOT EXISTS ${_zb_pch_source})
    file(WRITE ${_zb_pch_source}
      "// The unit that builds the shared precompiled header.\n")
  endif()
  add_library(ZBPrecompiledHeaders OBJECT ${_zb_pch_source})
  llvm_update_compile_flags(ZBPrecompiledHeaders)
  target_precompile_headers(ZBPrecompiledHeaders PRIVATE
    <llvm/ADT/MapVector.h>
    <llvm/ADT/STLExtras.h>
    <llvm/ADT/SetVector.h>
    <llvm/ADT/StringMap.h>
    <llvm/Support/FileSystem.h>
    <llvm/Support/raw_ostream.h>
    <mlir/Dialect/Arith/IR/Arith.h>
    <mlir/Dialect/Func/IR/FuncOps.h>
    <mlir/Dialect/Linalg/IR/Linalg.h>
    <mlir/Dialect/Math/IR/Math.h>
    <mlir/Dialect/MemRef/IR/MemRef.h>
    <mlir/Dialect/SCF/IR/SCF.h>
    <mlir/Dialect/Tensor/IR/Tensor.h>
    <mlir/IR/Builders.h>
    <mlir/IR/BuiltinOps.h>
    <mlir/IR/IRMapping.h>
    <mlir/IR/Matchers.h>
    <mlir/IR/PatternMatch.h>
    <mlir/IR/SymbolTable.h>
    <mlir/Pass/Pass.h>
    <mlir/Pass/PassManager.h>
    <mlir/Transforms/GreedyPatternRewriteDriver.h>
    <mlir/Transforms/RegionUtils.h>
  )
endif()

# Makes `target` (an MLIR library's name or any other target compiled with
# the project's MLIR flags) use the shared precompiled header.
function(zb_precompile_headers target)
  if(NOT ZB_PRECOMPILED_HEADERS)
    return()
  endif()
  # add_mlir_library compiles a library's units in obj.<name>.
  if(TARGET obj.${target})
    set(target obj.${target})
  endif()
  target_precompile_headers(${target} REUSE_FROM ZBPrecompiledHeaders)
endfunction()
