//===- Optimizer.cpp - SGD and AdamW on host arrays -----------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Optimizer.h"

#include <cmath>
#include <cstring>

using namespace zbrt;

Optimizer Optimizer::sgd(double lr, double momentum, double weightDecay) {
  OptimizerConfig config;
  config.kind = OptimizerConfig::Kind::SGD;
  config.lr = lr;
  config.momentum = momentum;
  config.weightDecay = weightDecay;
  return Optimizer(config);
}

Optimizer Optimizer::adamw(double lr, double beta1, double beta2, double eps,
                           double weightDecay) {
  OptimizerConfig config;
  config.kind = OptimizerConfig::Kind::AdamW;
  config.lr = lr;
  config.beta1 = beta1;
  config.beta2 = beta2;
  config.eps = eps;
  config.weightDecay = weightDecay;
  return Optimizer(config);
}

static bool isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64;
}

/// A zero array like `array`.
static NpyArray zerosLike(const NpyArray &array) {
  NpyArray zeros;
  zeros.dtype = array.dtype;
  zeros.shape = array.shape;
  zeros.data.assign(array.data.size(), 0);
  return zeros;
}

namespace {

/// One parameter's update, on elements of type T.
template <typename T> struct Update {
  const OptimizerConfig &config;
  int64_t step; // The step being taken, from 1.

  void sgd(T *p, const T *g, T *buf, int64_t n) const {
    double lr = config.lr, mu = config.momentum, wd = config.weightDecay;
    for (int64_t i = 0; i < n; ++i) {
      double d = static_cast<double>(g[i]) + wd * static_cast<double>(p[i]);
      if (buf) {
        d = step == 1 ? d : mu * static_cast<double>(buf[i]) + d;
        buf[i] = static_cast<T>(d);
      }
      p[i] = static_cast<T>(static_cast<double>(p[i]) - lr * d);
    }
  }

  void adamw(T *p, const T *g, T *m, T *v, int64_t n) const {
    double lr = config.lr, b1 = config.beta1, b2 = config.beta2;
    double eps = config.eps, wd = config.weightDecay;
    double t = static_cast<double>(step);
    double correction1 = 1.0 - std::pow(b1, t);
    double correction2 = 1.0 - std::pow(b2, t);
    for (int64_t i = 0; i < n; ++i) {
      double gi = g[i];
      double mi = b1 * static_cast<double>(m[i]) + (1.0 - b1) * gi;
      double vi = b2 * static_cast<double>(v[i]) + (1.0 - b2) * gi * gi;
      m[i] = static_cast<T>(mi);
      v[i] = static_cast<T>(vi);
      double pi = static_cast<double>(p[i]) * (1.0 - lr * wd);
      pi -= lr * (mi / correction1) / (std::sqrt(vi / correction2) + eps);
      p[i] = static_cast<T>(pi);
    }
  }
};

} // namespace

template <typename T>
static void updateOne(const OptimizerConfig &config, int64_t step,
                      NpyArray &param, const NpyArray &grad, NpyArray *first,
                      NpyArray *second) {
  Update<T> update{config, step};
  int64_t n = param.numElements();
  if (config.kind == OptimizerConfig::Kind::SGD)
    update.sgd(param.as<T>(), grad.as<T>(), first ? first->as<T>() : nullptr,
               n);
  else
    update.adamw(param.as<T>(), grad.as<T>(), first->as<T>(), second->as<T>(),
                 n);
}

bool Optimizer::apply(NpzArchive &params, const NpzArchive &grads,
                      std::string &error) {
  // Check everything before changing anything.
  for (const auto &[name, param] : params) {
    auto it = grads.find(name);
    if (it == grads.end()) {
      error = "no gradient for parameter '" + name + "'";
      return false;
    }
    const NpyArray &grad = it->second;
    if (!isFloat(param.dtype)) {
      error = "parameter '" + name + "' is " + dtypeDescr(param.dtype) +
              ", not a float array";
      return false;
    }
    if (grad.dtype != param.dtype || grad.shape != param.shape ||
        grad.data.size() != param.data.size()) {
      error = "gradient of parameter '" + name + "' is " +
              dtypeDescr(grad.dtype) + " " + grad.shapeString() +
              ", the parameter " + dtypeDescr(param.dtype) + " " +
              param.shapeString();
      return false;
    }
    for (const NpzArchive *state : {&first, &second}) {
      auto found = state->find(name);
      if (found != state->end() && (found->second.dtype != param.dtype ||
                                    found->second.shape != param.shape)) {
        error = "optimizer state of parameter '" + name + "' is " +
                dtypeDescr(found->second.dtype) + " " +
                found->second.shapeString() + ", the parameter " +
                dtypeDescr(param.dtype) + " " + param.shapeString();
        return false;
      }
    }
  }

  ++step;
  bool adam = config.kind == OptimizerConfig::Kind::AdamW;
  bool needsFirst = adam || config.momentum != 0.0;
  for (auto &[name, param] : params) {
    const NpyArray &grad = grads.at(name);
    NpyArray *m = nullptr, *v = nullptr;
    if (needsFirst)
      m = &first.try_emplace(name, zerosLike(param)).first->second;
    if (adam)
      v = &second.try_emplace(name, zerosLike(param)).first->second;
    if (param.dtype == DType::F32)
      updateOne<float>(config, step, param, grad, m, v);
    else
      updateOne<double>(config, step, param, grad, m, v);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// State export and import
//===----------------------------------------------------------------------===//

namespace {
/// The names of one optimizer kind's state entries.
struct StateNames {
  const char *step;   // "adam.t"
  const char *first;  // "adam.m."
  const char *second; // "adam.v." or null
};
} // namespace

static StateNames stateNames(const OptimizerConfig &config) {
  if (config.kind == OptimizerConfig::Kind::AdamW)
    return {"adam.t", "adam.m.", "adam.v."};
  return {"sgd.t", "sgd.momentum.", nullptr};
}

NpzArchive Optimizer::exportState() const {
  StateNames names = stateNames(config);
  NpzArchive state;
  NpyArray t;
  t.dtype = DType::I64;
  t.data.resize(sizeof(int64_t));
  std::memcpy(t.data.data(), &step, sizeof(int64_t));
  state[names.step] = std::move(t);
  for (const auto &[name, array] : first)
    state[names.first + name] = array;
  if (names.second)
    for (const auto &[name, array] : second)
      state[names.second + name] = array;
  return state;
}

bool Optimizer::importState(const NpzArchive &state, std::string &error,
                            const NpzArchive *params) {
  StateNames names = stateNames(config);
  auto t = state.find(names.step);
  if (t == state.end()) {
    error = std::string("optimizer state has no '") + names.step +
            "' (was it written by another optimizer?)";
    return false;
  }
  if (t->second.dtype != DType::I64 || t->second.numElements() != 1 ||
      t->second.data.size() != sizeof(int64_t)) {
    error = std::string("optimizer state '") + names.step +
            "' is not one int64 value";
    return false;
  }
  int64_t newStep;
  std::memcpy(&newStep, t->second.data.data(), sizeof(int64_t));
  if (newStep < 0) {
    error = std::string("optimizer state '") + names.step + "' is negative";
    return false;
  }
  // Past 2^53 the step count would not count on (AdamW's bias correction
  // reads it as a double).
  if (newStep > (int64_t(1) << 53)) {
    error = std::string("optimizer state '") + names.step + "' is " +
            std::to_string(newStep) + ", past 2^53 steps";
    return false;
  }

  bool adam = config.kind == OptimizerConfig::Kind::AdamW;
  bool needsFirst = adam || config.momentum != 0.0;
  NpzArchive newFirst, newSecond;
  // Collects the entry `prefix + name` into `into`, checking it against the
  // parameter when there is one.
  auto take = [&](const std::string &prefix, const std::string &name,
                  const NpyArray &array, NpzArchive &into) {
    if (!isFloat(array.dtype)) {
      error = "optimizer state '" + prefix + name + "' is " +
              dtypeDescr(array.dtype) + ", not a float array";
      return false;
    }
    // What an update would turn into NaN everywhere: a value that is not
    // finite, a negative second moment (its square root).
    bool second = names.second && prefix == names.second;
    for (int64_t i = 0, e = array.numElements(); i < e; ++i) {
      double v = array.dtype == DType::F64 ? array.as<double>()[i]
                                           : array.as<float>()[i];
      if (!std::isfinite(v) || (second && v < 0)) {
        error = "optimizer state '" + prefix + name + "' holds " +
                (std::isfinite(v) ? "a negative value"
                                  : "a value that is not "
                                    "finite") +
                " (" + std::to_string(v) + " at element " + std::to_string(i) +
                ")";
        return false;
      }
    }
    if (params) {
      const NpyArray &param = params->at(name);
      if (array.dtype != param.dtype || array.shape != param.shape) {
        error = "optimizer state '" + prefix + name + "' is " +
                dtypeDescr(array.dtype) + " " + array.shapeString() +
                ", the parameter " + dtypeDescr(param.dtype) + " " +
                param.shapeString();
        return false;
      }
    }
    into[name] = array;
    return true;
  };
  auto collect = [&](const char *prefix, NpzArchive &into) {
    std::string p = prefix;
    if (params) {
      for (const auto &[name, param] : *params) {
        auto it = state.find(p + name);
        if (it == state.end()) {
          if (newStep == 0)
            continue;
          error = "optimizer state has no '" + p + name + "'";
          return false;
        }
        if (!take(p, name, it->second, into))
          return false;
      }
      return true;
    }
    for (auto it = state.lower_bound(p);
         it != state.end() && it->first.compare(0, p.size(), p) == 0; ++it)
      if (!take(p, it->first.substr(p.size()), it->second, into))
        return false;
    return true;
  };
  if (needsFirst && !collect(names.first, newFirst))
    return false;
  if (adam && !collect(names.second, newSecond))
    return false;
  if (adam)
    for (const auto &[name, m] : newFirst) {
      auto v = newSecond.find(name);
      if (v == newSecond.end() || v->second.shape != m.shape ||
          v->second.dtype != m.dtype) {
        error = "optimizer state '" + std::string(names.first) + name +
                "' has no matching '" + names.second + name + "'";
        return false;
      }
    }
  if (adam && newSecond.size() != newFirst.size()) {
    error = std::string("optimizer state has '") + names.second +
            "' entries without matching '" + names.first + "' ones";
    return false;
  }

  step = newStep;
  first = std::move(newFirst);
  second = std::move(newSecond);
  return true;
}
