//===- ApproximateMathTest.cpp - Compiled f32 math against libm ----------===//
//
// Part of ZeroBubble MLIR.
//
// --zb-approximate-math's f32 erf, exp, log and tanh, compiled for the CPU
// as a model's elementwise op is (a linalg.generic over a tensor, lowered by
// --zb-lower-to-cpu: loops that LLVM vectorises, with a scalar remainder),
// called on inputs spread over each function's range (every f32 where erf's
// error peaks) plus its special values, against the C library's
// double-precision function. The largest error, in f32 units in the last
// place of the exact value, must stay within each approximation's stated
// bound, and the compiled code must not call the C library for it.
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

#include <cassert>
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

/// `op` compiled for the CPU as a model's elementwise op over kCount f32s;
/// `libmName` is the C library function it must not call.
class Compiled {
public:
  Compiled(llvm::StringRef op, llvm::StringRef libmName) {
    mlir::DialectRegistry registry;
    ModelFile::registerDialects(registry);
    registerCPUCompilerDependencies(registry);
    mlir::MLIRContext context(registry);
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(elementwiseModule(op),
                                                &context);
    if (!module) {
      ADD_FAILURE() << "cannot parse the module for " << op.str();
      return;
    }
    if (llvm::sys::fs::createUniqueDirectory("zb-approx-math", dir)) {
      ADD_FAILURE() << "cannot create a temporary directory";
      dir.clear();
      return;
    }
    std::string path = (dir + "/fn.so").str();
    // Lowers the module in place.
    if (mlir::failed(
            compileToSharedObject(*module, path, CPUCompileOptions()))) {
      ADD_FAILURE() << "compiling " << op.str() << " failed";
      return;
    }
    std::string lowered;
    llvm::raw_string_ostream os(lowered);
    module->print(os);
    EXPECT_EQ(lowered.find(("@" + libmName).str()), std::string::npos)
        << op.str() << " calls the C library's " << libmName.str();
    std::string error;
    object = zbrt::SharedObject::open(path, error);
    EXPECT_TRUE(object) << error;
    if (object) {
      entry = object->lookup(kEntryPrefix.str() + "fn", error);
      EXPECT_TRUE(entry) << error;
    }
  }
  ~Compiled() {
    object.reset();
    if (!dir.empty())
      llvm::sys::fs::remove_directories(dir);
  }

  bool ok() const { return entry != nullptr; }

  /// The op on each of `inputs` (at most kCount of them).
  std::vector<float> operator()(const std::vector<float> &inputs) const {
    assert(ok() && static_cast<int64_t>(inputs.size()) <= kCount);
    zbrt::NpyArray in{
        zbrt::DType::F32, {kCount}, std::vector<char>(kCount * sizeof(float))};
    std::memcpy(in.data.data(), inputs.data(), inputs.size() * sizeof(float));
    zbrt::NpyArray out = in;
    zbrt::callEntry(entry, {&in, &out});
    return std::vector<float>(out.as<float>(), out.as<float>() + inputs.size());
  }

private:
  llvm::SmallString<128> dir;
  std::unique_ptr<zbrt::SharedObject> object;
  zbrt::EntryFn entry = nullptr;
};

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

/// `count` f32 bit patterns spread evenly from `lo` up to `hi` (finite,
/// 0 <= lo < hi), each negated in turn when `bothSigns`.
std::vector<float> spread(float lo, float hi, int64_t count, bool bothSigns) {
  assert(lo >= 0.0f && lo < hi && count >= 2);
  uint64_t first = bitsOf(lo), last = bitsOf(hi);
  std::vector<float> inputs;
  for (int64_t i = 0; i < count; ++i) {
    float x = floatOf(static_cast<uint32_t>(
        first + (last - first) * static_cast<uint64_t>(i) / (count - 1)));
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

/// The largest error of a compiled function against `exact`, in ulps, over
/// the inputs checked; a NaN result for a number counts as infinite, and an
/// exact NaN or value beyond f32's range must be matched exactly (NaN by
/// NaN, overflow by infinity).
struct Errors {
  Errors(const Compiled &fn, double (*exact)(double)) : fn(fn), exact(exact) {}

  void check(const std::vector<float> &inputs) {
    for (size_t at = 0; at < inputs.size(); at += kCount) {
      std::vector<float> chunk(
          inputs.begin() + at,
          inputs.begin() + std::min(inputs.size(), at + size_t(kCount)));
      std::vector<float> got = fn(chunk);
      for (size_t i = 0; i < chunk.size(); ++i)
        checkOne(chunk[i], got[i]);
    }
  }

  void checkOne(float x, float got) {
    double want = exact(x);
    // Beyond the largest f32 by half an ulp or more, f32 rounds to infinity.
    constexpr double kOverflow = 0x1.ffffffp127;
    if (std::isnan(want) || std::fabs(want) >= kOverflow) {
      bool same = std::isnan(want) ? std::isnan(got)
                                   : std::isinf(got) && (got > 0) == (want > 0);
      EXPECT_TRUE(same) << "f(" << x << ") = " << got << ", want " << want;
      return;
    }
    double error = std::isnan(got) ? std::numeric_limits<double>::infinity()
                                   : ulps(got, want);
    if (error > largest) {
      largest = error;
      worst = x;
    }
  }

  const Compiled &fn;
  double (*exact)(double);
  double largest = 0.0;
  float worst = 0.0f;
};

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

TEST(ApproximateMathTest, ErfWithinSixUlps) {
  Compiled erf("math.erf", "erff");
  ASSERT_TRUE(erf.ok());
  Errors errors(erf, [](double x) { return std::erf(x); });
  // Every f32 in [0.5, 3.8], where the error peaks (erf is odd, and so is
  // the approximation, bit for bit); beyond 3.8 the approximation is its
  // value there, as f32's erf is within an ulp of 1; spread samples below,
  // tiny ones checking the slope at 0, and both signs.
  std::vector<float> every;
  for (uint32_t bits = bitsOf(0.5f); bits <= bitsOf(3.8f); ++bits)
    every.push_back(floatOf(bits));
  errors.check(every);
  errors.check(spread(1e-38f, 0.5f, kCount, /*bothSigns=*/true));
  errors.check(spread(3.8f, 1e30f, 1000, /*bothSigns=*/true));
  errors.check({0.0f, kNaN, kInf, -kInf, 3.8f, -3.8f, -2.5f});
  EXPECT_LE(errors.largest, 6.0) << "at erf(" << errors.worst << ")";
  // -0 keeps its sign.
  EXPECT_TRUE(std::signbit(erf({-0.0f})[0]));
}

TEST(ApproximateMathTest, ExpWithinTwoUlps) {
  Compiled exp("math.exp", "expf");
  ASSERT_TRUE(exp.ok());
  Errors errors(exp, [](double x) { return std::exp(x); });
  // Inputs whose results are normal f32 numbers; overflow to infinity.
  errors.check(spread(1e-30f, 87.0f, kCount, /*bothSigns=*/true));
  errors.check({0.0f, -0.0f, kNaN, kInf, 89.0f, 100.0f});
  EXPECT_LE(errors.largest, 2.0) << "at exp(" << errors.worst << ")";
}

TEST(ApproximateMathTest, LogWithinTwoUlps) {
  Compiled log("math.log", "logf");
  ASSERT_TRUE(log.ok());
  Errors errors(log, [](double x) { return std::log(x); });
  // Normal inputs (MLIR's log takes a subnormal one as the smallest normal).
  errors.check(spread(std::numeric_limits<float>::min(),
                      std::numeric_limits<float>::max(), kCount,
                      /*bothSigns=*/false));
  errors.check({1.0f, kNaN, kInf, -1.0f, -kInf});
  EXPECT_LE(errors.largest, 2.0) << "at log(" << errors.worst << ")";
}

TEST(ApproximateMathTest, TanhWithinFiveUlps) {
  Compiled tanh("math.tanh", "tanhf");
  ASSERT_TRUE(tanh.ok());
  Errors errors(tanh, [](double x) { return std::tanh(x); });
  // MLIR's rational approximation on x clamped to [-7.9988, 7.9988] (x
  // itself below 0.0004): dense samples of that range, where the error
  // peaks (4.65 ulp near 7.08, 4.2 near 0.015), sparse ones beyond (where
  // f32's tanh is 1), tiny ones, both signs.
  errors.check(spread(3e-4f, 8.0f, 16 * kCount, /*bothSigns=*/false));
  errors.check(spread(1e-38f, 10.0f, kCount, /*bothSigns=*/true));
  errors.check(spread(10.0f, 1e30f, 1000, /*bothSigns=*/true));
  errors.check({0.0f, kNaN, kInf, -kInf});
  EXPECT_LE(errors.largest, 5.0) << "at tanh(" << errors.worst << ")";
  // -0 keeps its sign.
  EXPECT_TRUE(std::signbit(tanh({-0.0f})[0]));
}

} // namespace
