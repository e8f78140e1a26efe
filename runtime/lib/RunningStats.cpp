//===- RunningStats.cpp - What the forward records for running stats ------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/RunningStats.h"

#include "MemRefView.h"

#include "zbrt/zbrt.h"

#include <utility>

using namespace zbrt;

static bool recording = false;
static StatRecords records;

void zbrt::setRecordingStats(bool on) {
  recording = on;
  records.clear();
}

StatRecords zbrt::takeStatRecords() { return std::exchange(records, {}); }

/// Keeps the elements of `buf` (of type T) under the name in `name`.
template <typename T>
static void record(zbrt_unranked_memref *buf, zbrt_unranked_memref *name) {
  if (!recording)
    return;
  View nameView = viewOf(name, 1);
  std::string key(nameView.numElements(), '\0');
  nameView.packInto(key.data());
  View view = viewOf(buf, sizeof(T));
  std::vector<T> dense(view.numElements());
  view.packInto(reinterpret_cast<char *>(dense.data()));
  records[key].emplace_back(dense.begin(), dense.end());
}

void _mlir_ciface_zbrt_record_stat_f32(zbrt_unranked_memref *buf,
                                       zbrt_unranked_memref *name) {
  record<float>(buf, name);
}

void _mlir_ciface_zbrt_record_stat_f64(zbrt_unranked_memref *buf,
                                       zbrt_unranked_memref *name) {
  record<double>(buf, name);
}
