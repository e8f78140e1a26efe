//===- gpu_gemm_bench.cpp - The runtime's cuBLAS gemm path ----------------===//
//
// Part of ZeroBubble MLIR.
//
// Checks zbrt_gpu_sgemm_batched (and the bf16 variant) against a host gemm
// for every transposition, then prints the TFLOP/s of the gemm path compiled
// GPU code calls. Needs an NVIDIA GPU; built only with the GPU runtime,
// which it loads as zb-run does (zbrt::loadCUDARuntime).
//
//===----------------------------------------------------------------------===//

#include "zbrt/CUDA.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using namespace zbrt;

namespace {
using GemmFn = void (*)(int32_t, int32_t, int64_t, int64_t, int64_t, int64_t,
                        float, const float *, int64_t, int64_t, const float *,
                        int64_t, int64_t, float, float *, int64_t, int64_t);

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "zb-gpu-gemm-bench: error: %s\n", message.c_str());
  std::exit(1);
}

struct DeviceBuffer {
  const CUDARuntime &rt;
  float *data = nullptr;
  DeviceBuffer(const CUDARuntime &rt, size_t n) : rt(rt) {
    std::string error;
    data = static_cast<float *>(rt.alloc(n * sizeof(float), error));
    if (!data)
      die(error);
  }
  ~DeviceBuffer() { rt.free(data); }
};

/// Largest relative error of the device gemm against a host gemm, for a
/// small batched problem with the given transpositions.
double checkOne(const CUDARuntime &rt, GemmFn fn, bool transA, bool transB) {
  const int64_t batch = 3, m = 37, n = 53, k = 29;
  int64_t lda = transA ? m : k, ldb = transB ? k : n, ldc = n;
  size_t sa = m * k, sb = k * n, sc = m * n;
  std::mt19937 gen(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(batch * sa), b(batch * sb), c(batch * sc);
  for (float &x : a)
    x = dist(gen);
  for (float &x : b)
    x = dist(gen);
  for (float &x : c)
    x = dist(gen);
  std::vector<double> expected(c.begin(), c.end());
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t col = 0; col < n; ++col) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          float av = transA ? a[i * sa + p * lda + r] : a[i * sa + r * lda + p];
          float bv =
              transB ? b[i * sb + col * ldb + p] : b[i * sb + p * ldb + col];
          sum += double(av) * bv;
        }
        expected[i * sc + r * ldc + col] += 2.0 * sum;
      }
  DeviceBuffer da(rt, a.size()), db(rt, b.size()), dc(rt, c.size());
  std::string error;
  if (!rt.copyToDevice(da.data, a.data(), a.size() * 4, error) ||
      !rt.copyToDevice(db.data, b.data(), b.size() * 4, error) ||
      !rt.copyToDevice(dc.data, c.data(), c.size() * 4, error))
    die(error);
  fn(transA, transB, batch, m, n, k, 2.0f, da.data, lda, sa, db.data, ldb, sb,
     1.0f, dc.data, ldc, sc);
  if (!rt.copyToHost(c.data(), dc.data, c.size() * 4, error))
    die(error);
  double worst = 0;
  for (size_t i = 0; i < c.size(); ++i)
    worst = std::max(worst, std::fabs(c[i] - expected[i]) /
                                std::max(1.0, std::fabs(expected[i])));
  return worst;
}

/// TFLOP/s of `fn` on batch x (m x k) * (k x n).
double measure(const CUDARuntime &rt, GemmFn fn, int64_t batch, int64_t m,
               int64_t n, int64_t k) {
  DeviceBuffer a(rt, batch * m * k), b(rt, batch * k * n), c(rt, batch * m * n);
  std::string error;
  std::vector<float> ones(std::max({m * k, k * n, m * n}) * batch, 0.01f);
  if (!rt.copyToDevice(a.data, ones.data(), batch * m * k * 4, error) ||
      !rt.copyToDevice(b.data, ones.data(), batch * k * n * 4, error) ||
      !rt.copyToDevice(c.data, ones.data(), batch * m * n * 4, error))
    die(error);
  auto run = [&] {
    fn(0, 0, batch, m, n, k, 1.0f, a.data, k, m * k, b.data, n, k * n, 0.0f,
       c.data, n, m * n);
  };
  run(); // warm-up: cuBLAS picks its kernel
  if (!rt.synchronize(error))
    die(error);
  int iterations = 0;
  auto start = std::chrono::steady_clock::now();
  double seconds = 0;
  while (seconds < 0.5 || iterations < 5) {
    run();
    ++iterations;
    if (!rt.synchronize(error))
      die(error);
    seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  }
  return 2.0 * batch * m * n * k * iterations / seconds / 1e12;
}
} // namespace

int main() {
  std::string error;
  const CUDARuntime *rt = loadCUDARuntime(error);
  if (!rt)
    die(error);
  if (!rt->init(selectCUDADevice(rt->deviceCount()), error))
    die(error);
  std::printf("device: %s\n", rt->deviceName().c_str());
  // Resolved like compiled models resolve them: from the loaded runtime.
  auto lookup = [](const char *name) {
    auto fn = reinterpret_cast<GemmFn>(dlsym(RTLD_DEFAULT, name));
    if (!fn)
      die(std::string("the GPU runtime has no ") + name);
    return fn;
  };
  GemmFn f32 = lookup("zbrt_gpu_sgemm_batched");
  GemmFn bf16 = lookup("zbrt_gpu_sgemm_batched_bf16");

  bool ok = true;
  for (auto [name, fn, tol] :
       {std::tuple<const char *, GemmFn, double>{"f32", f32, 1e-5},
        {"bf16", bf16, 3e-2}}) {
    for (int t = 0; t < 4; ++t) {
      double err = checkOne(*rt, fn, t & 1, t & 2);
      bool pass = err <= tol;
      ok &= pass;
      std::printf("check %-4s transA=%d transB=%d: max rel error %.2e %s\n",
                  name, t & 1, (t & 2) >> 1, err, pass ? "ok" : "FAIL");
    }
  }

  std::printf("\n%-6s %-22s %10s\n", "dtype", "shape (batch x MxNxK)",
              "TFLOP/s");
  struct Shape {
    int64_t batch, m, n, k;
  };
  for (Shape s : {Shape{1, 4096, 4096, 4096}, Shape{1, 8192, 8192, 8192},
                  Shape{32, 1024, 1024, 128}}) {
    for (auto [name, fn] :
         {std::pair<const char *, GemmFn>{"f32", f32}, {"bf16", bf16}}) {
      char shape[64];
      std::snprintf(shape, sizeof(shape), "%ld x %ldx%ldx%ld", (long)s.batch,
                    (long)s.m, (long)s.n, (long)s.k);
      std::printf("%-6s %-22s %10.1f\n", name, shape,
                  measure(*rt, fn, s.batch, s.m, s.n, s.k));
    }
  }
  return ok ? 0 : 1;
}
