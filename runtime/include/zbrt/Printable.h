//===- Printable.h - File bytes in messages -------------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//
//
// Header only: the schedule library, which does not link the runtime, quotes
// the cells of the CSV files it imports with it too.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_PRINTABLE_H
#define ZBRT_PRINTABLE_H

#include <string>
#include <string_view>

namespace zbrt {

/// `text` read from a file, for a message: printable ASCII as it is, every
/// other byte (and the backslash) as \xNN, since a damaged file may hold
/// any bytes.
inline std::string printable(std::string_view text) {
  std::string out;
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && byte != '\\') {
      out.push_back(c);
      continue;
    }
    static const char digits[] = "0123456789abcdef";
    out += {'\\', 'x', digits[byte >> 4], digits[byte & 15]};
  }
  return out;
}

} // namespace zbrt

#endif // ZBRT_PRINTABLE_H
