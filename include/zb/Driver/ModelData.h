//===- ModelData.h - A model's parameters and data in one process -*- C++
//-*-===//
//
// Part of ZeroBubble MLIR.
//
// The values a run feeds a model (zb/Model/Model.h): parameters initialised
// from a seed or loaded from a .npz file, and data made synthetically per
// step and microbatch or sliced from an --inputs archive, converted to the
// model's element types. With replicas (data parallelism), replica r of D
// takes microbatches r*M .. r*M+M-1 of each step's D*M.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_DRIVER_MODELDATA_H
#define ZB_DRIVER_MODELDATA_H

#include "zb/Model/Model.h"

#include "zbrt/Npz.h"
#include "zbrt/RunningStats.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace zb {

/// The runtime's name for a tensor element type (f32 unless f64, i32, i64).
zbrt::DType dtypeOf(mlir::Type elementType);

/// The element type of the loss `signature`'s function returns (f32 or
/// f64), which its step functions return as well.
zbrt::DType lossDType(const ModelSignature &signature);

/// Converts `array` in place to `dtype`: float to float, integer to integer.
/// Returns false (leaving `array` alone) across the two kinds.
bool convertArray(zbrt::NpyArray &array, zbrt::DType dtype);

/// Element `i` of a float array (f32 or f64), as a double.
double loadScalar(const zbrt::NpyArray &array, int64_t i);
/// Whether an array of `from` converts to `to` (convertArray): float to
/// float, integer to integer.
bool canConvert(zbrt::DType from, zbrt::DType to);

/// Stores `v` into element `i` of a float array, rounded to its type.
void storeScalar(zbrt::NpyArray &array, int64_t i, double v);

/// "[2, 3]".
std::string shapeString(llvm::ArrayRef<int64_t> shape);

/// Where a run's values come from.
struct DataOptions {
  /// Parameters from this .npz archive; empty: initialised from `seed`.
  std::string paramsPath;
  /// Data from this .npz archive ([D*M][shape] or [K][D*M][shape] per data
  /// argument); empty: synthetic from `seed`.
  std::string inputsPath;
  uint64_t seed = 0;
  /// Microbatches per step and replica (M).
  int64_t microbatches = 1;
  /// Steps of the run (K), for --inputs arrays holding every step.
  int64_t steps = 1;
  /// Replicas (D) and this process's one.
  int64_t replicas = 1;
  int64_t replica = 0;
};

/// A model's parameters and data, for one process.
class ModelData {
public:
  ModelData(const ModelSignature &signature, DataOptions options);

  /// Loads or initialises the parameters and loads the data. Returns an
  /// error message naming the file and the array at fault, empty on
  /// success.
  std::string prepare();

  /// Checks the files `options` names against `signature` as prepare()
  /// does, reading only their arrays' headers (readNpzHeaders) and
  /// initialising nothing: what a launcher checks once before it starts
  /// the ranks. Returns prepare()'s message for what is wrong, empty when
  /// nothing is. `unknown`, when given, is set to a warning naming the
  /// files' arrays that match no argument or running statistic of the model
  /// (a misspelt name, a file for another model), empty when none do.
  static std::string checkFiles(const ModelSignature &signature,
                                DataOptions options,
                                std::string *unknown = nullptr);

  /// The number of microbatch `mb` of step `step` among all the run's
  /// microbatches (every replica's): what synthetic data is seeded with.
  int64_t globalMicrobatch(int64_t step, int64_t mb) const;
  /// Fills data argument `arg` of global microbatch `microbatch` from the
  /// seed: synthetic data, or a {zb.rng} argument's key (zbrt::rngKey).
  void synthesize(const ModelArg &arg, zbrt::NpyArray &value,
                  int64_t microbatch) const;
  /// Whether data argument `arg` comes from the seed (synthesize()) rather
  /// than --inputs: without an inputs file, and always for a random key.
  bool fromSeed(const ModelArg &arg) const {
    return opts.inputsPath.empty() || arg.rng;
  }

  /// This replica's microbatches of data argument `arg` for step `step`:
  /// [M][shape].
  zbrt::NpyArray stepData(const ModelArg &arg, int64_t step) const;

  /// Sets every data argument in values() to microbatch `mb` of step `step`.
  void bindMicrobatch(int64_t step, int64_t mb);

  /// Every argument in signature order (data ones hold the microbatch last
  /// bound).
  std::vector<zbrt::NpyArray> &values() { return args; }
  const ModelSignature &signature() const { return sig; }
  const DataOptions &options() const { return opts; }

  /// The parameters `params`, keyed by name.
  zbrt::NpzArchive paramArchive(llvm::ArrayRef<const ModelArg *> params) const;
  /// Sets each of `params` to its value in `values`.
  void setParams(llvm::ArrayRef<const ModelArg *> params,
                 const zbrt::NpzArchive &values);
  /// The parameters `params`, keyed by name, moved out (no copy): until
  /// they are given back with setParams, values() holds them empty.
  zbrt::NpzArchive takeParams(llvm::ArrayRef<const ModelArg *> params);
  /// Gives each of `params` its value in `values`, moved in.
  void setParams(llvm::ArrayRef<const ModelArg *> params,
                 zbrt::NpzArchive &&values);

  /// The model's running statistics (pipe.running_stat buffers), keyed by
  /// name: from the parameters file where it has them, else every element
  /// at the statistic's initial value.
  const zbrt::NpzArchive &runningStats() const { return stats; }
  /// Those this process has updated (foldStatRecords) since prepare().
  zbrt::NpzArchive updatedStats() const;
  /// Folds each recorded value into its buffer, in the order recorded:
  /// buffer = (1 - momentum) * buffer + momentum * value. Returns an error
  /// naming a statistic the model does not have or a value of the wrong
  /// size; empty on success.
  std::string foldStatRecords(const zbrt::StatRecords &records);
  /// Sets the running statistics `values` has (a checkpoint's) to its
  /// values. Returns an error naming one whose shape differs.
  std::string setRunningStats(const zbrt::NpzArchive &values);

private:
  /// prepare(), or with `headersOnly` checkFiles(); sets `unknown` as
  /// checkFiles() says.
  std::string load(bool headersOnly, std::string *unknown = nullptr);

  /// The element offset of microbatch `mb` of step `step` (this replica's)
  /// in the --inputs array `all` whose microbatch holds `bytes` bytes.
  size_t inputOffset(const zbrt::NpyArray &all, size_t bytes, int64_t step,
                     int64_t mb) const;

  const ModelSignature &sig;
  DataOptions opts;
  std::vector<zbrt::NpyArray> args;
  /// Per data argument from --inputs: [D*M][shape] or [K][D*M][shape].
  std::vector<zbrt::NpyArray> inputs;
  zbrt::NpzArchive stats;
  std::set<std::string> updated;
};

/// `grads[i]`, the gradient of `params[i]`, keyed by the parameter's name
/// (moved there).
zbrt::NpzArchive namedArrays(llvm::ArrayRef<const ModelArg *> params,
                             std::vector<zbrt::NpyArray> &&grads);

} // namespace zb

#endif // ZB_DRIVER_MODELDATA_H
