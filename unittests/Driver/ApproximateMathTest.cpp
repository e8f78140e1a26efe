//===- ApproximateMathTest.cpp - Compiled f32 math against libm ----------===//
//
// Part of ZeroBubble MLIR.
//
// --zb-approximate-math's f32 erf, exp and log, compiled for the CPU as a
// model's elementwise op is (a linalg.generic over a tensor, lowered by
// --zb-lower-to-cpu: loops that LLVM vectorises, with a scalar remainder),
// called on a million inputs spread over each function's range plus its
// special values, against the C library's double-precision function rounded
// to f32. The largest error, in units in the last place of the exact value,
// must stay within each approximation's stated bound.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/ModelFile.h"
#include "zb/Target/CPUCompiler.h"

#include "zbrt/Executable.h"
#include "zbrt/Npz.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>

using namespace zb;

namespace {

/// One input per element: an odd count, so that the vector loop leaves a
/// scalar remainder.
constexpr int64_t kCount = (int64_t(1) << 20) + 3;

/// `@fn` applying `op` to every element of a 1-d f32 tensor.
std::string elementwiseModule(llvm::StringRef op) {
  std::string text = R"mlir(
#id = affine_map<(d0) -> (d0)>
func.func @fn(%x: tensor<NxF32>) -> tensor<NxF32> {
  %init = tensor.empty() : tensor<NxF32>
  %y = linalg.generic {indexing_maps = [#id, #id],
                       iterator_types = ["parallel"]}
      ins(%x : tensor<NxF32>) outs(%init : tensor<NxF32>) {
  ^bb0(%in: f32, %out: f32):
    %r = OP %in : f32
    linalg.yield %r : f32
  } -> tensor<NxF32>
  return %y : tensor<NxF32>
}
)mlir";
  std::string type = std::to_string(kCount) + "xf32";
  for (size_t at; (at = text.find("NxF32")) != std::string::npos;)
    text.replace(at, 5, type);
  text.replace(text.find("OP"), 2, op.str());
  return text;
}

/// The compiled `op` applied to `inputs` (kCount of them).
std::vector<float> compiledOn(llvm::StringRef op,
                              const std::vector<float> &inputs) {
  mlir::DialectRegistry registry;
  ModelFile::registerDialects(registry);
  registerCPUCompilerDependencies(registry);
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(elementwiseModule(op), &context);
  EXPECT_TRUE(module) << "cannot parse the module for " << op.str();
  if (!module)
    return {};
  llvm::SmallString<128> dir;
  EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("zb-approx-math", dir));
  std::string path = (dir + "/fn.so").str();
  std::vector<float> result;
  if (mlir::succeeded(
          compileToSharedObject(*module, path, CPUCompileOptions()))) {
    std::string error;
    std::unique_ptr<zbrt::SharedObject> object =
        zbrt::SharedObject::open(path, error);
    EXPECT_TRUE(object) << error;
    zbrt::EntryFn entry =
        object ? object->lookup(kEntryPrefix.str() + "fn", error) : nullptr;
    EXPECT_TRUE(entry) << error;
    if (entry) {
      zbrt::NpyArray in{zbrt::DType::F32,
                        {kCount},
                        std::vector<char>(kCount * sizeof(float))};
      std::memcpy(in.data.data(), inputs.data(), in.data.size());
      zbrt::NpyArray out = in;
      zbrt::callEntry(entry, {&in, &out});
      result.assign(out.as<float>(), out.as<float>() + kCount);
    }
  } else {
    ADD_FAILURE() << "compiling " << op.str() << " failed";
  }
  llvm::sys::fs::remove_directories(dir);
  return result;
}

uint32_t bitsOf(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

float floatOf(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

/// `special` first, then evenly spaced f32 bit patterns from `lo` up to
/// `hi` (both finite, of one sign), negated in turn when `bothSigns`.
std::vector<float> inputsFor(float lo, float hi, bool bothSigns,
                             std::vector<float> special) {
  std::vector<float> inputs = std::move(special);
  uint32_t first = bitsOf(lo), last = bitsOf(hi);
  int64_t rest = kCount - static_cast<int64_t>(inputs.size());
  for (int64_t i = 0; i < rest; ++i) {
    auto bits = static_cast<uint32_t>(first + (uint64_t(last - first) * i) /
                                                  (rest - 1));
    float x = floatOf(bits);
    inputs.push_back(bothSigns && i % 2 ? -x : x);
  }
  return inputs;
}

/// The distance from `got` to `exact` in f32 ulps at `exact` (the spacing
/// of f32 numbers in its binade; subnormal spacing below the normal range).
double ulps(float got, double exact) {
  double magnitude =
      std::max(std::fabs(exact), double(std::numeric_limits<float>::min()));
  double spacing = std::ldexp(1.0, std::ilogb(magnitude) - 23);
  return std::fabs(static_cast<double>(got) - exact) / spacing;
}

/// The largest error of `op` over `inputs` against `exact`, in ulps; a NaN
/// or an exact value that overflows f32 must be matched exactly (NaN by NaN,
/// overflow by infinity).
double largestError(llvm::StringRef op, const std::vector<float> &inputs,
                    double (*exact)(double), float &worst) {
  std::vector<float> got = compiledOn(op, inputs);
  if (got.size() != inputs.size())
    return std::numeric_limits<double>::infinity();
  double largest = 0.0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    double want = exact(inputs[i]);
    // Past f32's range (or NaN), only the exact result will do.
    if (std::isnan(want) || std::isinf(static_cast<float>(want))) {
      bool same = std::isnan(want) ? std::isnan(got[i])
                                   : got[i] == static_cast<float>(want);
      EXPECT_TRUE(same) << op.str() << "(" << inputs[i] << ") = " << got[i]
                        << ", want " << want;
      continue;
    }
    double error = ulps(got[i], want);
    if (error > largest) {
      largest = error;
      worst = inputs[i];
    }
  }
  return largest;
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

TEST(ApproximateMathTest, ErfWithinFiveUlps) {
  // Beyond 3.8 the approximation is its value at 3.8, as f32's erf is
  // within an ulp of 1 there; tiny inputs check the slope at 0.
  std::vector<float> inputs =
      inputsFor(1e-30f, 6.0f, /*bothSigns=*/true,
                {0.0f, -0.0f, kNaN, kInf, -kInf, 3.8f, -3.8f, 1e30f, -1e30f});
  float worst = 0.0f;
  double error = largestError(
      "math.erf", inputs, [](double x) { return std::erf(x); }, worst);
  EXPECT_LE(error, 5.0) << "at erf(" << worst << ")";
}

TEST(ApproximateMathTest, ExpWithinTwoUlps) {
  // Inputs whose results are normal f32 numbers; overflow to infinity.
  std::vector<float> inputs = inputsFor(1e-30f, 87.0f, /*bothSigns=*/true,
                                        {0.0f, -0.0f, kNaN, kInf, 89.0f});
  float worst = 0.0f;
  double error = largestError(
      "math.exp", inputs, [](double x) { return std::exp(x); }, worst);
  EXPECT_LE(error, 2.0) << "at exp(" << worst << ")";
}

TEST(ApproximateMathTest, LogWithinTwoUlps) {
  std::vector<float> inputs =
      inputsFor(1e-37f, 1e37f, /*bothSigns=*/false,
                {1.0f, kNaN, kInf, -1.0f, std::numeric_limits<float>::max()});
  float worst = 0.0f;
  double error = largestError(
      "math.log", inputs, [](double x) { return std::log(x); }, worst);
  EXPECT_LE(error, 2.0) << "at log(" << worst << ")";
}

} // namespace
