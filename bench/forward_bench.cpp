//===- forward_bench.cpp - Compiled forward and gemm path timings ---------===//
//
// Part of ZeroBubble MLIR.
//
// zb-forward-bench [--examples DIR] [--dump DIR] [--repeats N]
//                  [--min-time-ms T] [--threads N] [--tsv] [--quick]
//                  [--only forward|gemm|causal|model-gemm]
//                  [--keep-objects]
//
// Prints, side by side in one run:
//   * forward: microseconds per forward of the compiled examples/mlp.mlir
//     and examples/gpt.mlir (parameters from seed 0 and microbatch 0 of the
//     synthetic data, as `zb-run --eval` makes them), called through the
//     packed entry with prebuilt descriptors and through zbrt::callEntry;
//   * gemm: zbrt_sgemm_batched (what compiled code calls for every
//     matmul-family op, alpha = beta = 1) against the same products as
//     direct cblas_sgemm calls, for the shapes the examples use, the
//     medium and large GPT's of bench/peer_torch.py and larger; and the
//     zbrt call again with B packed once (a zbrt::PackedWeights scope over
//     it), as a step's products with a weight for B run;
//   * causal: causal attention's six products per head at the medium and
//     large GPT's sizes (scores, P V, dP, dV, dQ, dK), each as
//     zbrt_sgemm_batched_terms with the term set
//     --zb-mark-triangular-products gives it against every term
//     (zbrt_sgemm_batched) and OpenBLAS;
//   * model gemm: a compiled one-matmul function (C = A B, accumulator
//     zero-filled in the compiled code) through the whole compiled path
//     against one direct cblas_sgemm with beta = 0.
//
// Each timing is the median over --repeats runs (default 11) of a loop
// calibrated to run at least --min-time-ms (default 20), after a warm-up.
// The two sides of a ratio run interleaved, and the ratio printed is the
// median of the per-repeat ratios (each of two adjacent runs), which
// follows the machine's load less than the ratio of the medians does.
// OpenBLAS runs on --threads threads (default 1).
// --dump DIR writes each model's parameters and data (<model>_params.npz,
// <model>_inputs.npz) so that bench/forward_bench.py can run the same
// forward in NumPy. --tsv prints machine-readable rows instead of tables.
// --only runs one section; --keep-objects keeps the compiled shared objects
// (and prints where), e.g. for `perf record` + `perf report`.
//
//===----------------------------------------------------------------------===//

#include "zb/Driver/ModelData.h"
#include "zb/Model/Model.h"
#include "zb/Target/CPUCompiler.h"

#include "zbrt/Executable.h"
#include "zbrt/Gemm.h"
#include "zbrt/Init.h"
#include "zbrt/Npz.h"
#include "zbrt/zbrt.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace mlir;

#ifndef ZB_EXAMPLES_DIR
#define ZB_EXAMPLES_DIR "examples"
#endif

namespace {

struct Options {
  std::string examplesDir = ZB_EXAMPLES_DIR;
  std::string dumpDir;
  int repeats = 11;
  double minTimeMs = 20;
  int threads = 1;
  bool tsv = false;
  bool quick = false;
  bool keepObjects = false;
  std::string only;
};

Options options;
/// Where the compiled shared objects go (a fresh temporary directory).
std::string workDir;

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "zb-forward-bench: error: %s\n", message.c_str());
  if (!workDir.empty() && !options.keepObjects)
    llvm::sys::fs::remove_directories(workDir);
  std::exit(1);
}

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Runs `body` (which runs its argument's number of iterations) with a
/// calibrated iteration count; returns the iteration count.
int64_t calibrate(const std::function<void(int64_t)> &body) {
  body(1); // warm-up: first touch, lazy binding, BLAS buffers
  int64_t iters = 1;
  while (true) {
    double t0 = now();
    body(iters);
    double dt = now() - t0;
    if (dt * 1e3 >= options.minTimeMs / 4 || iters >= (int64_t(1) << 30))
      return std::max<int64_t>(
          1, int64_t(iters * options.minTimeMs / std::max(dt * 1e3, 1e-6)));
    iters *= dt * 1e3 < options.minTimeMs / 64 ? 16 : 2;
  }
}

/// Interleaved timings of two or more bodies: the median per-iteration time
/// of each (microseconds) and the median over the repeats of body 0's time
/// over body 1's in the same repeat (adjacent in time, so a ratio that drifts
/// less with the machine's load than the ratio of the medians).
struct Timings {
  std::vector<double> us;
  /// bodies[0]'s time over bodies[1]'s.
  double ratio = 0;
  /// Each body's time over bodies[1]'s.
  std::vector<double> ratios;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Timings timeInterleaved(
    const std::vector<std::function<void(int64_t)>> &bodies) {
  std::vector<int64_t> iters;
  for (const auto &body : bodies)
    iters.push_back(calibrate(body));
  std::vector<std::vector<double>> samples(bodies.size());
  for (int r = 0; r < options.repeats; ++r)
    for (size_t i = 0; i < bodies.size(); ++i) {
      double t0 = now();
      bodies[i](iters[i]);
      samples[i].push_back((now() - t0) * 1e6 / iters[i]);
    }
  Timings t;
  for (const std::vector<double> &s : samples)
    t.us.push_back(median(s));
  for (const std::vector<double> &s : samples) {
    std::vector<double> ratios;
    for (int r = 0; r < options.repeats; ++r)
      ratios.push_back(s[r] / samples[1][r]);
    t.ratios.push_back(median(ratios));
  }
  t.ratio = t.ratios[0];
  return t;
}

/// Memref descriptors for `arrays`, built once (the layout zbrt::callEntry
/// builds on every call).
struct Descriptors {
  std::vector<std::vector<int64_t>> storage;
  std::vector<void *> args;

  explicit Descriptors(const std::vector<zbrt::NpyArray *> &arrays) {
    storage.resize(arrays.size());
    for (size_t i = 0; i < arrays.size(); ++i) {
      zbrt::NpyArray &array = *arrays[i];
      size_t rank = array.shape.size();
      std::vector<int64_t> &d = storage[i];
      d.resize(3 + 2 * rank);
      d[0] = d[1] = reinterpret_cast<int64_t>(array.data.data());
      d[2] = 0;
      int64_t stride = 1;
      for (size_t r = rank; r-- > 0;) {
        d[3 + r] = array.shape[r];
        d[3 + rank + r] = stride;
        stride *= array.shape[r];
      }
      args.push_back(d.data());
    }
  }
};

/// Compiles `module` into the work directory; returns the loaded object.
std::unique_ptr<zbrt::SharedObject> compile(ModuleOp module,
                                            const std::string &name,
                                            double &seconds) {
  std::string soPath = workDir + "/" + name + ".so";
  double t0 = now();
  if (failed(zb::compileToSharedObject(module, soPath, zb::CPUCompileOptions())))
    die("compiling '" + name + "' failed");
  seconds = now() - t0;
  std::string error;
  std::unique_ptr<zbrt::SharedObject> object =
      zbrt::SharedObject::open(soPath, error);
  if (!object)
    die(error);
  return object;
}

zbrt::EntryFn lookup(const zbrt::SharedObject &object,
                     const std::string &fn) {
  std::string error;
  zbrt::EntryFn entry =
      object.lookup(std::string(zb::kEntryPrefix) + fn, error);
  if (!entry)
    die(error);
  return entry;
}

struct ForwardResult {
  std::string model;
  double directUs, callEntryUs, loss, compileSeconds;
};

ForwardResult benchForward(MLIRContext &context, const std::string &name) {
  std::string path = options.examplesDir + "/" + name + ".mlir";
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(path, sourceMgr, &context);
  if (!module)
    die("cannot parse '" + path + "' (pass --examples DIR)");
  FailureOr<zb::ModelSignature> signature = zb::analyzeModel(*module);
  if (failed(signature))
    die("'" + path + "' is not a model");
  std::string fnName = signature->func.getSymName().str();
  zbrt::DType lossType =
      zb::dtypeOf(cast<RankedTensorType>(signature->func.getResultTypes()[0])
                      .getElementType());

  // Parameters and data exactly as `zb-run --eval` (seed 0, microbatch 0).
  std::vector<zbrt::NpyArray> values(signature->args.size());
  zbrt::NpzArchive params, inputs;
  for (const zb::ModelArg &arg : signature->args) {
    zbrt::NpyArray &value = values[arg.position];
    value.dtype = zb::dtypeOf(arg.type.getElementType());
    value.shape = arg.shape();
    if (arg.isParam()) {
      zbrt::initParam(value, arg.name, /*seed=*/0);
      params[arg.name] = value;
    } else {
      value.data.resize(value.numElements() * zbrt::dtypeSize(value.dtype));
      zbrt::synthesizeData(value, arg.name, /*seed=*/0, /*index=*/0,
                           arg.range);
      inputs[arg.name] = value;
    }
  }
  if (!options.dumpDir.empty()) {
    std::string error;
    if (!zbrt::writeNpz(options.dumpDir + "/" + name + "_params.npz", params,
                        error) ||
        !zbrt::writeNpz(options.dumpDir + "/" + name + "_inputs.npz", inputs,
                        error))
      die(error);
  }

  double compileSeconds;
  std::unique_ptr<zbrt::SharedObject> object =
      compile(*module, name, compileSeconds);
  zbrt::EntryFn entry = lookup(*object, fnName);

  zbrt::NpyArray loss{lossType, {},
                      std::vector<char>(zbrt::dtypeSize(lossType))};
  std::vector<zbrt::NpyArray *> arrays;
  for (zbrt::NpyArray &v : values)
    arrays.push_back(&v);
  arrays.push_back(&loss);
  Descriptors descriptors(arrays);

  Timings t = timeInterleaved({
      [&](int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          entry(descriptors.args.data());
      },
      [&](int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          zbrt::callEntry(entry, arrays);
      },
  });
  double l = lossType == zbrt::DType::F64 ? loss.as<double>()[0]
                                          : loss.as<float>()[0];
  return {name, t.us[0], t.us[1], l, compileSeconds};
}

struct GemmShape {
  std::string use;
  int64_t batch, m, n, k;
  bool transA = false, transB = false;
};

std::string shapeLabel(const GemmShape &s) {
  std::string label = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                      std::to_string(s.k);
  if (s.batch > 1)
    label = std::to_string(s.batch) + "*" + label;
  if (s.transA || s.transB)
    label += std::string(" ") + (s.transA ? "T" : "N") + (s.transB ? "T" : "N");
  return label;
}

std::vector<float> randomMatrix(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

struct GemmResult {
  GemmShape shape;
  double zbrtUs, blasUs, ratio, packedUs, packedRatio;
};

/// zbrt_sgemm_batched as compiled code calls it (row-major, alpha = beta =
/// 1) against the same products as direct cblas_sgemm calls; and the same
/// call inside a zbrt::PackedWeights scope over B, as a step runs it with B
/// a weight (packed at the first call, reused by the others).
/// `s`'s batch of products as direct cblas_sgemm calls, C = A B + beta C.
void blasBatch(const GemmShape &s, const float *a, const float *b, float beta,
               float *c) {
  int64_t lda = s.transA ? s.m : s.k, ldb = s.transB ? s.k : s.n;
  for (int64_t j = 0; j < s.batch; ++j)
    cblas_sgemm(CblasRowMajor, s.transA ? CblasTrans : CblasNoTrans,
                s.transB ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, 1.f,
                a + j * s.m * s.k, lda, b + j * s.k * s.n, ldb, beta,
                c + j * s.m * s.n, s.n);
}

GemmResult benchGemm(const GemmShape &s) {
  std::vector<float> a = randomMatrix(s.batch * s.m * s.k, 1);
  std::vector<float> b = randomMatrix(s.batch * s.k * s.n, 2);
  std::vector<float> c1(s.batch * s.m * s.n, 0.f), c2 = c1;
  int64_t sa = s.m * s.k, sb = s.k * s.n, sc = s.m * s.n;
  int64_t lda = s.transA ? s.m : s.k, ldb = s.transB ? s.k : s.n;
  Timings t = timeInterleaved({
      [&](int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          zbrt_sgemm_batched(s.transA, s.transB, s.batch, s.m, s.n, s.k, 1.f,
                             a.data(), lda, sa, b.data(), ldb, sb, 1.f,
                             c1.data(), s.n, sc);
      },
      [&](int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          blasBatch(s, a.data(), b.data(), 1.f, c2.data());
      },
      [&](int64_t n) {
        zbrt::PackedWeights scope({{b.data(), b.size() * sizeof(float)}});
        for (int64_t i = 0; i < n; ++i)
          zbrt_sgemm_batched(s.transA, s.transB, s.batch, s.m, s.n, s.k, 1.f,
                             a.data(), lda, sa, b.data(), ldb, sb, 1.f,
                             c1.data(), s.n, sc);
      },
  });
  return {s, t.us[0], t.us[1], t.ratio, t.us[2], t.ratios[2]};
}

struct CausalResult {
  GemmShape shape;
  int terms;
  double termsUs, allUs, blasUs, termsRatio, blasRatio;
};

/// zbrt_sgemm_batched_terms with `terms` against the same call over every
/// term and against OpenBLAS, interleaved (beta = 0).
CausalResult benchCausal(const GemmShape &s, int terms) {
  std::vector<float> a = randomMatrix(s.batch * s.m * s.k, 1);
  std::vector<float> b = randomMatrix(s.batch * s.k * s.n, 2);
  std::vector<float> c(s.batch * s.m * s.n, 0.f);
  int64_t sa = s.m * s.k, sb = s.k * s.n, sc = s.m * s.n;
  int64_t lda = s.transA ? s.m : s.k, ldb = s.transB ? s.k : s.n;
  Timings t = timeInterleaved({
      [&](int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          zbrt_sgemm_batched_terms(terms, s.transA, s.transB, s.batch, s.m, s.n,
                                   s.k, 1.f, a.data(), lda, sa, b.data(), ldb,
                                   sb, 0.f, c.data(), s.n, sc);
      },
      [&](int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          zbrt_sgemm_batched(s.transA, s.transB, s.batch, s.m, s.n, s.k, 1.f,
                             a.data(), lda, sa, b.data(), ldb, sb, 0.f,
                             c.data(), s.n, sc);
      },
      [&](int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          blasBatch(s, a.data(), b.data(), 0.f, c.data());
      },
  });
  return {s, terms, t.us[0], t.us[1], t.us[2], t.ratio, t.us[0] / t.us[2]};
}

struct ModelGemmResult {
  GemmShape shape;
  double compiledUs, blasUs, ratio, maxError;
};

/// A compiled one-matmul function against one direct cblas_sgemm.
ModelGemmResult benchModelGemm(MLIRContext &context, const GemmShape &s) {
  std::string m = std::to_string(s.m), n = std::to_string(s.n),
              k = std::to_string(s.k);
  std::string tA = "tensor<" + m + "x" + k + "xf32>",
              tB = "tensor<" + k + "x" + n + "xf32>",
              tC = "tensor<" + m + "x" + n + "xf32>";
  std::string text =
      "func.func @matmul(%a: " + tA + ", %b: " + tB + ") -> " + tC + " {\n"
      "  %zero = arith.constant 0.0 : f32\n"
      "  %e = tensor.empty() : " + tC + "\n"
      "  %z = linalg.fill ins(%zero : f32) outs(%e : " + tC + ") -> " + tC +
      "\n"
      "  %c = linalg.matmul ins(%a, %b : " + tA + ", " + tB + ") outs(%z : " +
      tC + ") -> " + tC + "\n"
      "  return %c : " + tC + "\n"
      "}\n";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module)
    die("cannot parse the generated matmul model");
  double compileSeconds;
  std::unique_ptr<zbrt::SharedObject> object =
      compile(*module, "matmul_" + shapeLabel(s), compileSeconds);
  zbrt::EntryFn entry = lookup(*object, "matmul");

  auto matrix = [](int64_t rows, int64_t cols, std::vector<float> values) {
    zbrt::NpyArray array{zbrt::DType::F32, {rows, cols}, {}};
    array.data.resize(values.size() * sizeof(float));
    std::memcpy(array.data.data(), values.data(), array.data.size());
    return array;
  };
  zbrt::NpyArray a = matrix(s.m, s.k, randomMatrix(s.m * s.k, 1));
  zbrt::NpyArray b = matrix(s.k, s.n, randomMatrix(s.k * s.n, 2));
  zbrt::NpyArray c = matrix(s.m, s.n, std::vector<float>(s.m * s.n, 0.f));
  std::vector<float> ref(s.m * s.n, 0.f);
  Descriptors descriptors({&a, &b, &c});
  Timings t = timeInterleaved({
      [&](int64_t iters) {
        for (int64_t i = 0; i < iters; ++i)
          entry(descriptors.args.data());
      },
      [&](int64_t iters) {
        for (int64_t i = 0; i < iters; ++i)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n,
                      s.k, 1.f, a.as<float>(), s.k, b.as<float>(), s.n, 0.f,
                      ref.data(), s.n);
      },
  });
  double maxError = 0;
  for (int64_t i = 0; i < s.m * s.n; ++i)
    maxError = std::max<double>(maxError,
                                std::fabs(c.as<float>()[i] - ref[i]));
  return {s, t.us[0], t.us[1], t.ratio, maxError};
}

void usage() {
  std::printf(
      "usage: zb-forward-bench [--examples DIR] [--dump DIR] [--repeats N]\n"
      "                        [--min-time-ms T] [--threads N] [--tsv] "
      "[--quick]\n"
      "                        [--only forward|gemm|causal|model-gemm] "
      "[--keep-objects]\n");
}

void parseArgs(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        die("'" + arg + "' needs a value");
      return argv[++i];
    };
    auto number = [&](const std::string &text) -> double {
      char *end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end || !(v > 0))
        die("'" + arg + "' needs a positive number, got '" + text + "'");
      return v;
    };
    if (arg == "--examples")
      options.examplesDir = value();
    else if (arg == "--dump")
      options.dumpDir = value();
    else if (arg == "--repeats")
      options.repeats = int(number(value()));
    else if (arg == "--min-time-ms")
      options.minTimeMs = number(value());
    else if (arg == "--threads")
      options.threads = int(number(value()));
    else if (arg == "--tsv")
      options.tsv = true;
    else if (arg == "--quick")
      options.quick = true;
    else if (arg == "--keep-objects")
      options.keepObjects = true;
    else if (arg == "--only") {
      options.only = value();
      if (options.only != "forward" && options.only != "gemm" &&
          options.only != "causal" && options.only != "model-gemm")
        die("--only takes forward, gemm, causal or model-gemm, got '" +
            options.only + "'");
    }
    else if (arg == "-h" || arg == "--help") {
      usage();
      std::exit(0);
    } else {
      usage();
      die("unknown argument '" + arg + "'");
    }
  }
  if (options.quick) {
    options.repeats = std::min(options.repeats, 3);
    options.minTimeMs = std::min(options.minTimeMs, 5.0);
  }
}

} // namespace

int main(int argc, char **argv) {
  parseArgs(argc, argv);
  openblas_set_num_threads(options.threads);

  llvm::SmallString<128> dir;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("zb-forward-bench", dir))
    die("cannot create a temporary directory: " + ec.message());
  workDir = dir.str().str();

  DialectRegistry registry;
  zb::registerCPUCompilerDependencies(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  const char *config = openblas_get_config();
  std::string blas = config ? config : "unknown";
  int threads = openblas_get_num_threads();

  auto runs = [](const char *section) {
    return options.only.empty() || options.only == section;
  };
  std::vector<ForwardResult> forwards;
  if (runs("forward"))
    for (const char *model : {"mlp", "gpt"})
      forwards.push_back(benchForward(context, model));

  std::vector<GemmShape> shapes = {
      {"mlp layer 1", 1, 8, 32, 16},
      {"mlp layer 2", 1, 8, 32, 32},
      {"mlp layer 3", 1, 8, 10, 32},
      {"gpt q/k/v/proj", 1, 32, 32, 32},
      {"gpt mlp fc", 1, 32, 128, 32},
      {"gpt mlp proj", 1, 32, 32, 128},
      {"gpt lm head", 1, 32, 64, 32},
      {"gpt attention", 4, 16, 16, 16},
      {"square", 1, 256, 256, 256},
      {"square", 1, 512, 512, 512},
      // bench/peer_torch.py --size medium (256 tokens, width 256) and
      // large (512 tokens, width 512): forward X W, backward dY W^T,
      // weight gradient X^T dY; attention per head.
      {"medium qkv F", 1, 256, 768, 256},
      {"medium fc F", 1, 256, 1024, 256},
      {"medium fc B", 1, 256, 256, 1024, false, true},
      {"medium fc W", 1, 256, 1024, 256, true, false},
      {"medium attn", 16, 64, 64, 64},
      {"large fc F", 1, 512, 2048, 512},
      {"large fc B", 1, 512, 512, 2048, false, true},
      {"large fc W", 1, 512, 2048, 512, true, false},
      {"large attn", 32, 128, 128, 64},
  };
  std::vector<GemmResult> gemms;
  if (runs("gemm"))
    for (const GemmShape &s : shapes)
      gemms.push_back(benchGemm(s));

  // Per head: T x T scores from T x d rows (K^T read transposed), P V,
  // dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q; the term sets of
  // zbrt.h (ZBRT_TERMS_*) that --zb-mark-triangular-products leads to.
  std::vector<std::pair<GemmShape, int>> causalShapes;
  for (auto [size, heads, t, d] :
       {std::tuple<const char *, int64_t, int64_t, int64_t>{"medium", 16, 64,
                                                            64},
        {"large", 32, 128, 64}}) {
    std::string name = size;
    causalShapes.push_back(
        {{name + " S=QK^T", heads, t, t, d, false, true}, ZBRT_TERMS_N_UPTO_M});
    causalShapes.push_back(
        {{name + " O=PV", heads, t, d, t, false, false}, ZBRT_TERMS_K_UPTO_M});
    causalShapes.push_back({{name + " dP=dOV^T", heads, t, t, d, false, true},
                            ZBRT_TERMS_N_UPTO_M});
    causalShapes.push_back({{name + " dV=P^TdO", heads, t, d, t, true, false},
                            ZBRT_TERMS_K_FROM_M});
    causalShapes.push_back({{name + " dQ=dSK", heads, t, d, t, false, false},
                            ZBRT_TERMS_K_UPTO_M});
    causalShapes.push_back({{name + " dK=dS^TQ", heads, t, d, t, true, false},
                            ZBRT_TERMS_K_FROM_M});
  }
  std::vector<CausalResult> causals;
  if (runs("causal"))
    for (const auto &[shape, terms] : causalShapes)
      causals.push_back(benchCausal(shape, terms));

  std::vector<GemmShape> modelShapes = {
      {"gpt q/k/v/proj", 1, 32, 32, 32},
      {"gpt mlp fc", 1, 32, 128, 32},
      {"square", 1, 256, 256, 256},
      {"square", 1, 512, 512, 512},
  };
  std::vector<ModelGemmResult> modelGemms;
  if (runs("model-gemm"))
    for (const GemmShape &s : modelShapes)
      modelGemms.push_back(benchModelGemm(context, s));

  if (options.keepObjects)
    std::fprintf(stderr, "zb-forward-bench: compiled objects kept in %s\n",
                 workDir.c_str());
  else
    llvm::sys::fs::remove_directories(workDir);

  if (options.tsv) {
    std::printf("info\tblas\t%s\n", blas.c_str());
    std::printf("info\tthreads\t%d\n", threads);
    std::printf("info\trepeats\t%d\n", options.repeats);
    std::printf("info\tmin_time_ms\t%g\n", options.minTimeMs);
    for (const ForwardResult &f : forwards)
      std::printf("forward\t%s\t%.4f\t%.4f\t%.9g\t%.3f\n", f.model.c_str(),
                  f.directUs, f.callEntryUs, f.loss, f.compileSeconds);
    for (const GemmResult &g : gemms)
      std::printf("gemm\t%s\t%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\n",
                  shapeLabel(g.shape).c_str(), g.shape.use.c_str(), g.zbrtUs,
                  g.blasUs, g.ratio, g.packedUs, g.packedRatio);
    for (const CausalResult &g : causals)
      std::printf("causal\t%s\t%s\t%d\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\n",
                  shapeLabel(g.shape).c_str(), g.shape.use.c_str(), g.terms,
                  g.termsUs, g.allUs, g.blasUs, g.termsRatio, g.blasRatio);
    for (const ModelGemmResult &g : modelGemms)
      std::printf("model-gemm\t%s\t%s\t%.4f\t%.4f\t%.4f\t%.3g\n",
                  shapeLabel(g.shape).c_str(), g.shape.use.c_str(),
                  g.compiledUs, g.blasUs, g.ratio, g.maxError);
    return 0;
  }

  std::printf("OpenBLAS: %s, %d thread(s); median of %d repeats, each >= "
              "%g ms\n",
              blas.c_str(), threads, options.repeats, options.minTimeMs);
  if (!forwards.empty()) {
    std::printf("\n%-6s %14s %16s %12s %12s\n", "model", "forward us",
                "via callEntry us", "loss", "compile s");
    for (const ForwardResult &f : forwards)
      std::printf("%-6s %14.2f %16.2f %12.6f %12.2f\n", f.model.c_str(),
                  f.directUs, f.callEntryUs, f.loss, f.compileSeconds);
  }

  if (!gemms.empty()) {
    std::printf("\ngemm path (zbrt_sgemm_batched, beta=1; kernel: %s) vs "
                "direct cblas_sgemm; \"B packed\": zbrt with B a weight "
                "packed once (zbrt::PackedWeights)\n",
                zbrt::sgemmKernelName());
    std::printf("%-19s %-15s %10s %12s %10s %12s %10s\n", "shape m*n*k", "use",
                "zbrt us", "OpenBLAS us", "zbrt/BLAS", "B packed us",
                "packed/BLAS");
    for (const GemmResult &g : gemms)
      std::printf("%-19s %-15s %10.3f %12.3f %10.3f %12.3f %10.3f\n",
                  shapeLabel(g.shape).c_str(), g.shape.use.c_str(), g.zbrtUs,
                  g.blasUs, g.ratio, g.packedUs, g.packedRatio);
  }

  if (!causals.empty()) {
    std::printf("\ncausal attention's products: zbrt_sgemm_batched_terms "
                "(the terms the mask leaves) vs every term and OpenBLAS, "
                "beta=0\n");
    std::printf("%-19s %-16s %5s %10s %10s %12s %10s %10s\n", "shape m*n*k",
                "use", "terms", "terms us", "all us", "OpenBLAS us",
                "terms/all", "terms/BLAS");
    for (const CausalResult &g : causals)
      std::printf("%-19s %-16s %5d %10.3f %10.3f %12.3f %10.3f %10.3f\n",
                  shapeLabel(g.shape).c_str(), g.shape.use.c_str(), g.terms,
                  g.termsUs, g.allUs, g.blasUs, g.termsRatio, g.blasRatio);
  }

  if (!modelGemms.empty()) {
    std::printf("\ncompiled one-matmul function (fill + gemm) vs one direct "
                "cblas_sgemm (beta=0)\n");
    std::printf("%-16s %-15s %12s %12s %10s %10s\n", "shape m*n*k", "use",
                "compiled us", "OpenBLAS us", "comp/BLAS", "max |err|");
    for (const ModelGemmResult &g : modelGemms)
      std::printf("%-16s %-15s %12.3f %12.3f %10.3f %10.2g\n",
                  shapeLabel(g.shape).c_str(), g.shape.use.c_str(),
                  g.compiledUs, g.blasUs, g.ratio,
                  g.maxError);
  }
  return 0;
}
