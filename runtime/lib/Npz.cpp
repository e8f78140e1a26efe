//===- Npz.cpp - NumPy .npz archives --------------------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Npz.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
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

static uint32_t crc32(const char *data, size_t size) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i)
    c = table[(c ^ static_cast<uint8_t>(data[i])) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

static uint64_t readLE(const std::string &buf, size_t pos, int bytes) {
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

/// Parses one .npy payload into `array`.
static bool parseNpy(const std::string &bytes, NpyArray &array,
                     std::string &error) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) {
    error = "not a .npy array (bad magic)";
    return false;
  }
  int major = static_cast<uint8_t>(bytes[6]);
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = readLE(bytes, 8, 2);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) {
      error = "truncated .npy header";
      return false;
    }
    headerLen = readLE(bytes, 8, 4);
    headerStart = 12;
  } else {
    error = "unsupported .npy version " + std::to_string(major);
    return false;
  }
  if (headerStart + headerLen > bytes.size()) {
    error = "truncated .npy header";
    return false;
  }
  std::string header = bytes.substr(headerStart, headerLen);

  auto valueOf = [&](const std::string &key) -> std::string {
    size_t k = header.find("'" + key + "'");
    if (k == std::string::npos)
      return "";
    size_t colon = header.find(':', k);
    return colon == std::string::npos ? "" : header.substr(colon + 1);
  };
  std::string descr = valueOf("descr");
  size_t q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  if (q1 == std::string::npos || q2 == std::string::npos) {
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
    error = "unsupported dtype '" + descr +
            "' (supported: float32, float64, int32, int64, little-endian)";
    return false;
  }
  std::string fortran = valueOf("fortran_order");
  if (fortran.compare(fortran.find_first_not_of(' '), 4, "True") == 0) {
    error = "Fortran-ordered arrays are not supported (use C order)";
    return false;
  }
  std::string shape = valueOf("shape");
  size_t open = shape.find('('), close = shape.find(')');
  if (open == std::string::npos || close == std::string::npos) {
    error = "malformed .npy header (no shape)";
    return false;
  }
  array.shape.clear();
  std::stringstream dims(shape.substr(open + 1, close - open - 1));
  std::string dim;
  while (std::getline(dims, dim, ',')) {
    if (dim.find_first_not_of(" ") == std::string::npos)
      continue;
    array.shape.push_back(std::stoll(dim));
  }
  size_t dataStart = headerStart + headerLen;
  size_t expected = array.numElements() * dtypeSize(array.dtype);
  if (bytes.size() - dataStart != expected) {
    error = "holds " + std::to_string(bytes.size() - dataStart) +
            " bytes of data, but shape " + array.shapeString() + " needs " +
            std::to_string(expected);
    return false;
  }
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

bool zbrt::readNpz(const std::string &path, NpzArchive &archive,
                   std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::string buf((std::istreambuf_iterator<char>(in)),
                  std::istreambuf_iterator<char>());
  auto fail = [&](const std::string &what) {
    error = "'" + path + "' is not a valid .npz archive: " + what;
    return false;
  };
  // Find the end-of-central-directory record.
  if (buf.size() < 22)
    return fail("too short");
  size_t eocd = std::string::npos;
  for (size_t i = buf.size() - 22 + 1; i-- > 0;) {
    if (readLE(buf, i, 4) == 0x06054b50) {
      eocd = i;
      break;
    }
    if (buf.size() - i > 22 + 65535)
      break;
  }
  if (eocd == std::string::npos)
    return fail("no end of central directory");
  uint64_t entries = readLE(buf, eocd + 10, 2);
  uint64_t cdOffset = readLE(buf, eocd + 16, 4);
  if (cdOffset == 0xFFFFFFFFu || entries == 0xFFFF) {
    // ZIP64 end of central directory locator precedes the record.
    if (eocd < 20 || readLE(buf, eocd - 20, 4) != 0x07064b50)
      return fail("bad ZIP64 locator");
    uint64_t z64 = readLE(buf, eocd - 12, 8);
    if (z64 + 56 > buf.size() || readLE(buf, z64, 4) != 0x06064b50)
      return fail("bad ZIP64 end of central directory");
    entries = readLE(buf, z64 + 32, 8);
    cdOffset = readLE(buf, z64 + 48, 8);
  }
  archive.clear();
  size_t pos = cdOffset;
  for (uint64_t e = 0; e < entries; ++e) {
    if (pos + 46 > buf.size() || readLE(buf, pos, 4) != 0x02014b50)
      return fail("bad central directory entry");
    uint64_t method = readLE(buf, pos + 10, 2);
    uint32_t crc = readLE(buf, pos + 16, 4);
    uint64_t compSize = readLE(buf, pos + 20, 4);
    uint64_t size = readLE(buf, pos + 24, 4);
    uint64_t nameLen = readLE(buf, pos + 28, 2);
    uint64_t extraLen = readLE(buf, pos + 30, 2);
    uint64_t commentLen = readLE(buf, pos + 32, 2);
    uint64_t localOffset = readLE(buf, pos + 42, 4);
    if (pos + 46 + nameLen + extraLen > buf.size())
      return fail("truncated central directory");
    std::string name = buf.substr(pos + 46, nameLen);
    // ZIP64 extra field: sizes and offset that did not fit.
    size_t x = pos + 46 + nameLen, xEnd = x + extraLen;
    while (x + 4 <= xEnd) {
      uint64_t id = readLE(buf, x, 2), len = readLE(buf, x + 2, 2);
      if (id == 0x0001) {
        size_t f = x + 4;
        if (size == 0xFFFFFFFFu) {
          size = readLE(buf, f, 8);
          f += 8;
        }
        if (compSize == 0xFFFFFFFFu) {
          compSize = readLE(buf, f, 8);
          f += 8;
        }
        if (localOffset == 0xFFFFFFFFu)
          localOffset = readLE(buf, f, 8);
      }
      x += 4 + len;
    }
    pos += 46 + nameLen + extraLen + commentLen;

    std::string arrayName = name;
    if (arrayName.size() > 4 &&
        arrayName.compare(arrayName.size() - 4, 4, ".npy") == 0)
      arrayName.resize(arrayName.size() - 4);
    if (method != 0) {
      error = "array '" + arrayName + "' in '" + path +
              "' is compressed; write it with numpy.savez, not "
              "numpy.savez_compressed";
      return false;
    }
    if (localOffset + 30 > buf.size() ||
        readLE(buf, localOffset, 4) != 0x04034b50)
      return fail("bad local header for '" + name + "'");
    size_t dataStart = localOffset + 30 + readLE(buf, localOffset + 26, 2) +
                       readLE(buf, localOffset + 28, 2);
    if (dataStart + size > buf.size() || compSize != size)
      return fail("truncated data for '" + name + "'");
    if (crc32(buf.data() + dataStart, size) != crc)
      return fail("CRC mismatch for '" + name + "' (corrupted file)");
    std::string npyError;
    if (!parseNpy(buf.substr(dataStart, size), archive[arrayName],
                  npyError)) {
      error = "array '" + arrayName + "' in '" + path + "': " + npyError;
      return false;
    }
  }
  return true;
}

bool zbrt::writeFileAtomically(const std::string &path,
                               const std::string &contents,
                               std::string &error) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    error = "cannot write '" + tmp + "': " + std::strerror(errno);
    return false;
  }
  bool ok = std::fwrite(contents.data(), 1, contents.size(), f) ==
                contents.size() &&
            std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
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
      error = "array '" + name + "' is too large for '" + path + "'";
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
