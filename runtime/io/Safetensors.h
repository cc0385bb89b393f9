//===- Safetensors.h - Read and write safetensors files ---------*- C++ -*-===//
//
// The safetensors format (huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON header, then the data section. The header
// maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the data section) and may hold "__metadata__", a map
// of strings to strings.
//
// Reading validates everything the header claims against the file before any
// tensor is touched: the header length, the JSON, every entry's fields, that
// each tensor's byte range matches shape * dtype size, lies inside the file
// and overlaps no other, and that the tensors cover the data section without
// holes (as the format requires). Every error names the file.
//
// Writing is atomic (see AtomicFile.h): the output exists complete or not at
// all.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_IO_SAFETENSORS_H
#define TETRA_RUNTIME_IO_SAFETENSORS_H

#include "runtime/io/Error.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tetra::io {

/// The element types of the safetensors format (the fixed-width ones).
enum class Dtype : uint8_t {
  Bool,
  U8,
  I8,
  U16,
  I16,
  F16,
  BF16,
  U32,
  I32,
  F32,
  U64,
  I64,
  F64,
  F8E4M3,
  F8E5M2,
  F8E8M0,
};

/// The header's spelling: "F32", "BF16", "F8_E4M3", ...
std::string_view dtypeName(Dtype dtype);
std::optional<Dtype> parseDtype(std::string_view name);
/// Bytes per element.
size_t dtypeSize(Dtype dtype);
/// Whether tensors of this dtype convert to and from float: F32, F16, BF16.
bool isFloatDtype(Dtype dtype);

/// "[256, 512]", "[]" for a scalar.
std::string shapeToString(const std::vector<int64_t> &shape);

/// IEEE binary16 and bfloat16 conversions. To 16 bits: round to nearest,
/// ties to even; overflow gives infinity; NaN stays NaN (F16: quieted, sign
/// and top payload bits kept; BF16: numerics::encodeBF16's canonical NaN).
/// From 16 bits: exact.
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
uint16_t floatToBFloat16(float value);
float bfloat16ToFloat(uint16_t bits);

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<int64_t> shape;
  /// Byte range [begin, end) in the data section.
  uint64_t dataBegin = 0;
  uint64_t dataEnd = 0;

  int64_t numElements() const;
  uint64_t numBytes() const { return dataEnd - dataBegin; }
};

/// A validated safetensors file, mapped read-only. Move-only; tensor data
/// stays valid while the object lives.
class SafetensorsFile {
public:
  /// Opens, maps and validates `path`. Headers larger than this are refused
  /// (the reference implementation's limit).
  static constexpr uint64_t kMaxHeaderBytes = 100u * 1000u * 1000u;
  static Expected<SafetensorsFile> open(const std::string &path);

  SafetensorsFile(SafetensorsFile &&other) noexcept;
  SafetensorsFile &operator=(SafetensorsFile &&other) noexcept;
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;
  ~SafetensorsFile();

  const std::string &path() const { return path_; }
  /// The tensors in header order.
  const std::vector<TensorInfo> &tensors() const { return tensors_; }
  /// The tensor named `name`, or null.
  const TensorInfo *find(std::string_view name) const;
  /// "__metadata__", in header order.
  const std::vector<std::pair<std::string, std::string>> &metadata() const {
    return metadata_;
  }

  /// The raw little-endian bytes of `tensor` (not necessarily aligned).
  const uint8_t *data(const TensorInfo &tensor) const {
    return dataSection_ + tensor.dataBegin;
  }

  /// The elements of a F32, F16 or BF16 tensor as floats (exact).
  Expected<std::vector<float>> readFloats(const TensorInfo &tensor) const;

private:
  SafetensorsFile() = default;
  Status parseHeader(std::string_view header, uint64_t dataSize);

  std::string path_;
  void *mapping_ = nullptr;
  size_t mappingSize_ = 0;
  const uint8_t *dataSection_ = nullptr;
  std::vector<TensorInfo> tensors_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

/// Collects tensors and writes them as one safetensors file. The header lists
/// the tensors in the order added and pads with spaces to a multiple of 8
/// bytes; the data section holds the widest dtypes first, so that every
/// tensor's data is aligned to its element size.
class SafetensorsWriter {
public:
  /// Adds or replaces an entry of "__metadata__".
  void setMetadata(std::string key, std::string value);

  /// Adds a tensor whose raw little-endian bytes are `bytes`; fails if the
  /// name is taken or reserved, the shape has a negative dimension, or the
  /// size does not match shape * dtype size.
  Status addTensor(std::string name, Dtype dtype, std::vector<int64_t> shape,
                   std::vector<uint8_t> bytes);
  Status addTensor(std::string name, Dtype dtype, std::vector<int64_t> shape,
                   const void *data, size_t numBytes);
  /// Adds a tensor of F32, F16 or BF16 from floats (rounding to nearest
  /// even for the 16-bit types).
  Status addFloatTensor(std::string name, Dtype dtype,
                        std::vector<int64_t> shape, const float *data,
                        size_t count);

  size_t numTensors() const { return tensors_.size(); }

  /// The JSON header, padding included.
  std::string header() const;

  /// Writes the file atomically: `path` is replaced only if everything was
  /// written and flushed.
  Status write(const std::string &path) const;

private:
  struct Entry {
    std::string name;
    Dtype dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  /// Indices into tensors_ in data-section order.
  std::vector<size_t> dataOrder() const;

  std::vector<Entry> tensors_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

} // namespace tetra::io

#endif // TETRA_RUNTIME_IO_SAFETENSORS_H
