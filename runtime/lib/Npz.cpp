//===- Npz.cpp - NumPy .npz archives --------------------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Npz.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

using namespace zbrt;

const char *zbrt::dtypeDescr(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "<f4";
  case DType::F64:
    return "<f8";
  case DType::I32:
    return "<i4";
  case DType::I64:
    return "<i8";
  }
  return "?";
}

size_t zbrt::dtypeSize(DType dtype) {
  return dtype == DType::F32 || dtype == DType::I32 ? 4 : 8;
}

int64_t NpyArray::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string NpyArray::shapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

//===----------------------------------------------------------------------===//
// Little-endian helpers and CRC-32
//===----------------------------------------------------------------------===//

/// CRC-32 (ZIP's polynomial) eight bytes at a step ("slicing by 8": table
/// k holds the CRC of a byte followed by k zero bytes).
static uint32_t crc32(const char *data, size_t size) {
  static const std::array<std::array<uint32_t, 256>, 8> tables = [] {
    std::array<std::array<uint32_t, 256>, 8> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int k = 1; k < 8; ++k)
        t[k][i] = t[0][t[k - 1][i] & 0xFF] ^ (t[k - 1][i] >> 8);
    return t;
  }();
  const auto *bytes = reinterpret_cast<const uint8_t *>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (; size >= 8; size -= 8, bytes += 8) {
    uint32_t lo = c ^ (uint32_t(bytes[0]) | uint32_t(bytes[1]) << 8 |
                       uint32_t(bytes[2]) << 16 | uint32_t(bytes[3]) << 24);
    uint32_t hi = uint32_t(bytes[4]) | uint32_t(bytes[5]) << 8 |
                  uint32_t(bytes[6]) << 16 | uint32_t(bytes[7]) << 24;
    c = tables[7][lo & 0xFF] ^ tables[6][(lo >> 8) & 0xFF] ^
        tables[5][(lo >> 16) & 0xFF] ^ tables[4][lo >> 24] ^
        tables[3][hi & 0xFF] ^ tables[2][(hi >> 8) & 0xFF] ^
        tables[1][(hi >> 16) & 0xFF] ^ tables[0][hi >> 24];
  }
  for (; size > 0; --size, ++bytes)
    c = tables[0][(c ^ *bytes) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

static uint64_t readLE(std::string_view buf, size_t pos, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | static_cast<uint8_t>(buf[pos + i]);
  return v;
}

static void writeLE(std::string &buf, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    buf.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

/// Where a .npy payload's header text lies: from `textStart` (after the
/// magic, version and length) to `end`, where the data starts.
struct NpyHeaderSpan {
  size_t textStart = 0, end = 0;
};

/// The header span of a .npy payload, or an `end` of 0 with `error` set
/// when `prefix` (the payload's first 12 bytes, or all of a shorter one)
/// shows none.
static NpyHeaderSpan npyHeaderSpan(std::string_view prefix,
                                   std::string &error) {
  if (prefix.size() < 10 || prefix.compare(0, 6, "\x93NUMPY") != 0) {
    error = "not a .npy array (bad magic)";
    return {};
  }
  int major = static_cast<uint8_t>(prefix[6]);
  if (major == 1)
    return {10, 10 + readLE(prefix, 8, 2)};
  if (major != 2 && major != 3) {
    error = "unsupported .npy version " + std::to_string(major);
    return {};
  }
  if (prefix.size() < 12) {
    error = "truncated .npy header";
    return {};
  }
  return {12, 12 + readLE(prefix, 8, 4)};
}

/// Parses a .npy payload of `payloadSize` bytes into `array`: from
/// `bytes`, which holds the whole payload (the data copied into the array)
/// or, with `headerOnly`, at least its header (the array's data left
/// empty; the size its shape needs still checked against the payload's).
static bool parseNpy(std::string_view bytes, uint64_t payloadSize,
                     bool headerOnly, NpyArray &array, std::string &error) {
  NpyHeaderSpan span = npyHeaderSpan(bytes.substr(0, 12), error);
  size_t dataStart = span.end;
  if (dataStart == 0)
    return false;
  if (dataStart > bytes.size() || dataStart > payloadSize) {
    error = "truncated .npy header";
    return false;
  }
  std::string header(bytes.substr(span.textStart, dataStart - span.textStart));

  // The text after `key`'s colon, or "" where the header has no such key.
  auto valueOf = [&](const std::string &key) -> std::string {
    size_t k = header.find("'" + key + "'");
    if (k == std::string::npos)
      return "";
    size_t colon = header.find(':', k);
    return colon == std::string::npos ? "" : header.substr(colon + 1);
  };
  std::string descr = valueOf("descr");
  size_t q1 = descr.find('\'');
  size_t q2 = q1 == std::string::npos ? q1 : descr.find('\'', q1 + 1);
  if (q2 == std::string::npos) {
    error = "malformed .npy header (no descr)";
    return false;
  }
  descr = descr.substr(q1 + 1, q2 - q1 - 1);
  if (descr == "<f4")
    array.dtype = DType::F32;
  else if (descr == "<f8")
    array.dtype = DType::F64;
  else if (descr == "<i4")
    array.dtype = DType::I32;
  else if (descr == "<i8")
    array.dtype = DType::I64;
  else {
    error = "unsupported dtype '" + printable(descr) +
            "' (supported: float32, float64, int32, int64, little-endian)";
    return false;
  }
  std::string fortran = valueOf("fortran_order");
  size_t word = fortran.find_first_not_of(' ');
  if (word == std::string::npos || (fortran.compare(word, 5, "False") != 0 &&
                                    fortran.compare(word, 4, "True") != 0)) {
    error = "malformed .npy header (no fortran_order)";
    return false;
  }
  if (fortran.compare(word, 4, "True") == 0) {
    error = "Fortran-ordered arrays are not supported (use C order)";
    return false;
  }
  std::string shape = valueOf("shape");
  size_t open = shape.find('('), close = shape.find(')');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    error = "malformed .npy header (no shape)";
    return false;
  }
  array.shape.clear();
  std::stringstream dims(shape.substr(open + 1, close - open - 1));
  std::string dim;
  // Each dimension a count of elements; their product, in bytes, must not
  // overflow (the payload's size bounds it).
  uint64_t expected = dtypeSize(array.dtype);
  while (std::getline(dims, dim, ',')) {
    size_t first = dim.find_first_not_of(' ');
    if (first == std::string::npos)
      continue;
    size_t last = dim.find_last_not_of(' ');
    std::string digits = dim.substr(first, last - first + 1);
    if (digits.size() > 18 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      error = "malformed .npy header (shape " +
              printable(shape.substr(open, close - open + 1)) + ")";
      return false;
    }
    int64_t extent = std::stoll(digits);
    array.shape.push_back(extent);
    if (extent != 0 && expected > payloadSize / static_cast<uint64_t>(extent))
      expected = payloadSize + 1; // more than the payload holds
    else
      expected *= static_cast<uint64_t>(extent);
  }
  uint64_t held = payloadSize - dataStart;
  if (held != expected) {
    error = "holds " + std::to_string(held) + " bytes of data, but shape " +
            array.shapeString() + " needs " +
            (expected > payloadSize ? std::string("more than that")
                                    : std::to_string(expected));
    return false;
  }
  if (!headerOnly)
    array.data.assign(bytes.begin() + dataStart, bytes.end());
  return true;
}

/// Serialises `array` as a version 1.0 .npy payload.
static std::string formatNpy(const NpyArray &array) {
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i)
    shape += std::to_string(array.shape[i]) + ", ";
  if (array.shape.size() > 1)
    shape.resize(shape.size() - 2);
  else if (array.shape.size() == 1)
    shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = std::string("{'descr': '") + dtypeDescr(array.dtype) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so that the data starts at a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  writeLE(out, header.size(), 2);
  out += header;
  out.append(array.data.begin(), array.data.end());
  return out;
}

//===----------------------------------------------------------------------===//
// .npz (ZIP, stored)
//===----------------------------------------------------------------------===//

namespace {
/// A file's bytes: read whole when opened, or range by range on demand.
class FileBytes {
public:
  FileBytes(const std::string &path, bool whole) {
    struct stat info;
    if (::stat(path.c_str(), &info) != 0) {
      problem = "cannot open '" + path + "': " + std::strerror(errno);
      return;
    }
    // Ranges are read at offsets: a directory or a pipe has none.
    if (!S_ISREG(info.st_mode)) {
      problem = "'" + path + "' is not a regular file";
      return;
    }
    in.open(path, std::ios::binary);
    if (!in) {
      problem = "cannot open '" + path + "': " + std::strerror(errno);
      return;
    }
    fileSize = static_cast<uint64_t>(info.st_size);
    if (whole) {
      all.resize(fileSize);
      if (!in.read(all.data(), static_cast<std::streamsize>(fileSize)))
        problem = "cannot read '" + path + "': " + std::strerror(errno);
      isWhole = true;
    }
  }

  /// Why the file cannot be read, empty when it can.
  const std::string &error() const { return problem; }
  uint64_t size() const { return fileSize; }

  /// The bytes [offset, offset + len), fewer where the file ends sooner.
  std::string read(uint64_t offset, uint64_t len) {
    if (offset >= fileSize)
      return "";
    len = std::min(len, fileSize - offset);
    if (isWhole)
      return all.substr(offset, len);
    std::string bytes(len, '\0');
    in.clear();
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(bytes.data(), static_cast<std::streamsize>(len));
    bytes.resize(
        static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
    return bytes;
  }

  /// As read(), without a copy: a view of the file read whole, valid while
  /// this lives (a copy of the range when not read whole).
  std::string_view view(uint64_t offset, uint64_t len, std::string &copy) {
    if (!isWhole || offset >= fileSize) {
      copy = read(offset, len);
      return copy;
    }
    return std::string_view(all).substr(offset, len);
  }

private:
  std::ifstream in;
  std::string all;
  bool isWhole = false;
  uint64_t fileSize = 0;
  std::string problem;
};
} // namespace

/// readNpz, or with `headersOnly` readNpzHeaders.
static bool readArchive(const std::string &path, bool headersOnly,
                        NpzArchive &archive, std::string &error) {
  FileBytes file(path, /*whole=*/!headersOnly);
  if (!file.error().empty()) {
    error = file.error();
    return false;
  }
  auto fail = [&](const std::string &what) {
    error = "'" + path + "' is not a valid .npz archive: " + what;
    return false;
  };
  // Find the end-of-central-directory record: in the last 22 bytes, or
  // before a comment of at most 65535.
  uint64_t size = file.size();
  if (size < 22)
    return fail("too short");
  uint64_t tailStart = size > 22 + 65535 ? size - 22 - 65535 : 0;
  std::string tail = file.read(tailStart, size - tailStart);
  if (tail.size() != size - tailStart)
    return fail("cannot read its end");
  size_t eocd = std::string::npos;
  for (size_t i = tail.size() - 22 + 1; i-- > 0;) {
    if (readLE(tail, i, 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd == std::string::npos)
    return fail("no end of central directory");
  uint64_t eocdAt = tailStart + eocd;
  uint64_t entries = readLE(tail, eocd + 10, 2);
  uint64_t cdOffset = readLE(tail, eocd + 16, 4);
  if (cdOffset == 0xFFFFFFFFu || entries == 0xFFFF) {
    // ZIP64 end of central directory locator precedes the record.
    std::string locator = eocdAt < 20 ? "" : file.read(eocdAt - 20, 20);
    if (locator.size() < 20 || readLE(locator, 0, 4) != 0x07064b50)
      return fail("bad ZIP64 locator");
    std::string record = file.read(readLE(locator, 8, 8), 56);
    if (record.size() < 56 || readLE(record, 0, 4) != 0x06064b50)
      return fail("bad ZIP64 end of central directory");
    entries = readLE(record, 32, 8);
    cdOffset = readLE(record, 48, 8);
  }
  if (cdOffset > eocdAt)
    return fail("bad central directory entry");
  std::string dir = file.read(cdOffset, eocdAt - cdOffset);
  archive.clear();
  size_t pos = 0;
  for (uint64_t e = 0; e < entries; ++e) {
    if (pos + 46 > dir.size() || readLE(dir, pos, 4) != 0x02014b50)
      return fail("bad central directory entry");
    uint64_t method = readLE(dir, pos + 10, 2);
    uint32_t crc = readLE(dir, pos + 16, 4);
    uint64_t compSize = readLE(dir, pos + 20, 4);
    uint64_t entrySize = readLE(dir, pos + 24, 4);
    uint64_t nameLen = readLE(dir, pos + 28, 2);
    uint64_t extraLen = readLE(dir, pos + 30, 2);
    uint64_t commentLen = readLE(dir, pos + 32, 2);
    uint64_t localOffset = readLE(dir, pos + 42, 4);
    if (pos + 46 + nameLen + extraLen > dir.size())
      return fail("truncated central directory");
    std::string name = dir.substr(pos + 46, nameLen);
    // ZIP64 extra field: sizes and offset that did not fit.
    size_t x = pos + 46 + nameLen, xEnd = x + extraLen;
    while (x + 4 <= xEnd) {
      uint64_t id = readLE(dir, x, 2), len = readLE(dir, x + 2, 2);
      size_t f = x + 4, fEnd = std::min<size_t>(f + len, xEnd);
      if (id == 0x0001) {
        for (uint64_t *field : {&entrySize, &compSize, &localOffset}) {
          if (*field != 0xFFFFFFFFu)
            continue;
          if (f + 8 > fEnd)
            return fail("truncated ZIP64 field for '" + printable(name) + "'");
          *field = readLE(dir, f, 8);
          f += 8;
        }
      }
      x += 4 + len;
    }
    pos += 46 + nameLen + extraLen + commentLen;

    std::string arrayName = name;
    if (arrayName.size() > 4 &&
        arrayName.compare(arrayName.size() - 4, 4, ".npy") == 0)
      arrayName.resize(arrayName.size() - 4);
    // Two entries of one name: which one is meant cannot be known.
    if (archive.count(arrayName)) {
      error = "array '" + printable(arrayName) + "' in '" + path +
              "' appears twice";
      return false;
    }
    if (method != 0) {
      error = "array '" + printable(arrayName) + "' in '" + path +
              "' is compressed; write it with numpy.savez, not "
              "numpy.savez_compressed";
      return false;
    }
    std::string local = file.read(localOffset, 30);
    if (local.size() < 30 || readLE(local, 0, 4) != 0x04034b50)
      return fail("bad local header for '" + printable(name) + "'");
    uint64_t dataStart =
        localOffset + 30 + readLE(local, 26, 2) + readLE(local, 28, 2);
    if (dataStart > size || entrySize > size - dataStart ||
        compSize != entrySize)
      return fail("truncated data for '" + printable(name) + "'");
    std::string payload, npyError;
    if (headersOnly) {
      // The header alone (its size from the payload's first 12 bytes).
      payload = file.read(dataStart, std::min<uint64_t>(entrySize, 12));
      if (size_t header = npyHeaderSpan(payload, npyError).end)
        payload = file.read(dataStart, std::min<uint64_t>(entrySize, header));
    }
    std::string_view bytes = payload;
    if (!headersOnly) {
      bytes = file.view(dataStart, entrySize, payload);
      if (crc32(bytes.data(), bytes.size()) != crc)
        return fail("CRC mismatch for '" + printable(name) +
                    "' (corrupted file)");
    }
    if (!parseNpy(bytes, entrySize, headersOnly, archive[arrayName],
                  npyError)) {
      error =
          "array '" + printable(arrayName) + "' in '" + path + "': " + npyError;
      return false;
    }
  }
  return true;
}

bool zbrt::readNpz(const std::string &path, NpzArchive &archive,
                   std::string &error) {
  return readArchive(path, /*headersOnly=*/false, archive, error);
}

bool zbrt::readNpzHeaders(const std::string &path, NpzArchive &archive,
                          std::string &error) {
  return readArchive(path, /*headersOnly=*/true, archive, error);
}

/// Writes `contents` into open `f` and closes it; with `sync`, flushed to
/// the disk first. False on failure, errno then the first failure's.
static bool writeAndClose(FILE *f, const std::string &contents, bool sync) {
  bool wrote =
      std::fwrite(contents.data(), 1, contents.size(), f) == contents.size() &&
      std::fflush(f) == 0 && (!sync || fsync(fileno(f)) == 0);
  int cause = errno;
  bool closed = std::fclose(f) == 0;
  if (!wrote)
    errno = cause;
  return wrote && closed;
}

bool zbrt::writeFileAtomically(const std::string &path,
                               const std::string &contents,
                               std::string &error) {
  // A link is written through: the file it names is replaced, the link
  // kept (up to 40 links deep, as the kernel follows them).
  std::string target = path;
  char link[4096];
  for (int depth = 0; depth < 40; ++depth) {
    ssize_t n = readlink(target.c_str(), link, sizeof(link) - 1);
    if (n < 0)
      break;
    std::string next(link, n);
    size_t slash = target.rfind('/');
    if (next.front() != '/' && slash != std::string::npos)
      next = target.substr(0, slash + 1) + next;
    target = next;
  }
  struct stat info;
  if (stat(target.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    if (S_ISDIR(info.st_mode)) {
      error = "cannot write '" + path + "': it is a directory";
      return false;
    }
    // A device, a pipe or a socket (/dev/stdout, /dev/null): written as
    // it is, in place.
    FILE *f = std::fopen(target.c_str(), "wb");
    if (!f || !writeAndClose(f, contents, /*sync=*/false)) {
      error = "cannot write '" + path + "': " + std::strerror(errno);
      return false;
    }
    return true;
  }
  std::string tmp = target + ".tmp." + std::to_string(getpid());
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    error = "cannot write '" + tmp + "': " + std::strerror(errno);
    return false;
  }
  if (!writeAndClose(f, contents, /*sync=*/true) ||
      std::rename(tmp.c_str(), target.c_str()) != 0) {
    error = "cannot write '" + path + "': " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

bool zbrt::writeNpz(const std::string &path, const NpzArchive &archive,
                    std::string &error) {
  std::string out, central;
  uint64_t count = 0;
  for (const auto &[name, array] : archive) {
    std::string file = name + ".npy";
    std::string payload = formatNpy(array);
    if (payload.size() >= 0xFFFFFFFFu || out.size() >= 0xFFFFFFFFu) {
      error = "array '" + printable(name) + "' is too large for '" + path + "'";
      return false;
    }
    uint32_t crc = crc32(payload.data(), payload.size());
    uint64_t offset = out.size();
    // Local file header.
    writeLE(out, 0x04034b50, 4);
    writeLE(out, 20, 2); // version needed
    writeLE(out, 0, 2);  // flags
    writeLE(out, 0, 2);  // method: stored
    writeLE(out, 0, 2);  // time
    writeLE(out, 0x21, 2); // date: 1980-01-01
    writeLE(out, crc, 4);
    writeLE(out, payload.size(), 4);
    writeLE(out, payload.size(), 4);
    writeLE(out, file.size(), 2);
    writeLE(out, 0, 2);
    out += file;
    out += payload;
    // Central directory entry.
    writeLE(central, 0x02014b50, 4);
    writeLE(central, 20, 2); // version made by
    writeLE(central, 20, 2); // version needed
    writeLE(central, 0, 2);
    writeLE(central, 0, 2);
    writeLE(central, 0, 2);
    writeLE(central, 0x21, 2);
    writeLE(central, crc, 4);
    writeLE(central, payload.size(), 4);
    writeLE(central, payload.size(), 4);
    writeLE(central, file.size(), 2);
    writeLE(central, 0, 2); // extra
    writeLE(central, 0, 2); // comment
    writeLE(central, 0, 2); // disk
    writeLE(central, 0, 2); // internal attributes
    writeLE(central, 0, 4); // external attributes
    writeLE(central, offset, 4);
    central += file;
    ++count;
  }
  uint64_t cdOffset = out.size();
  out += central;
  writeLE(out, 0x06054b50, 4);
  writeLE(out, 0, 2);
  writeLE(out, 0, 2);
  writeLE(out, count, 2);
  writeLE(out, count, 2);
  writeLE(out, central.size(), 4);
  writeLE(out, cdOffset, 4);
  writeLE(out, 0, 2);
  return writeFileAtomically(path, out, error);
}
