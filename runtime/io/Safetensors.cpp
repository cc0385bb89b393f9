//===- Safetensors.cpp - Read and write safetensors files -----------------===//

#include "runtime/io/Safetensors.h"

#include "runtime/io/AtomicFile.h"
#include "runtime/io/Json.h"
#include "runtime/numerics/Formats.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_set>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error                                                                         \
    "safetensors data is little-endian; this reader assumes a little-endian host"
#endif

namespace tetra::io {

//===----------------------------------------------------------------------===//
// Dtypes and conversions
//===----------------------------------------------------------------------===//

namespace {

struct DtypeEntry {
  Dtype dtype;
  std::string_view name;
  size_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {Dtype::Bool, "BOOL", 1},      {Dtype::U8, "U8", 1},
    {Dtype::I8, "I8", 1},          {Dtype::U16, "U16", 2},
    {Dtype::I16, "I16", 2},        {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2},      {Dtype::U32, "U32", 4},
    {Dtype::I32, "I32", 4},        {Dtype::F32, "F32", 4},
    {Dtype::U64, "U64", 8},        {Dtype::I64, "I64", 8},
    {Dtype::F64, "F64", 8},        {Dtype::F8E4M3, "F8_E4M3", 1},
    {Dtype::F8E5M2, "F8_E5M2", 1}, {Dtype::F8E8M0, "F8_E8M0", 1},
};

const DtypeEntry &dtypeEntry(Dtype dtype) {
  for (const DtypeEntry &entry : kDtypes)
    if (entry.dtype == dtype)
      return entry;
  return kDtypes[0];
}

} // namespace

std::string_view dtypeName(Dtype dtype) { return dtypeEntry(dtype).name; }

std::optional<Dtype> parseDtype(std::string_view name) {
  for (const DtypeEntry &entry : kDtypes)
    if (entry.name == name)
      return entry.dtype;
  return std::nullopt;
}

size_t dtypeSize(Dtype dtype) { return dtypeEntry(dtype).size; }

bool isFloatDtype(Dtype dtype) {
  return dtype == Dtype::F32 || dtype == Dtype::F16 || dtype == Dtype::BF16;
}

std::string shapeToString(const std::vector<int64_t> &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

uint16_t floatToHalf(float value) {
  uint32_t bits = numerics::floatBits(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t magnitude = bits & 0x7FFFFFFF;
  if (magnitude > 0x7F800000) // NaN: quiet it, keep the top payload bits.
    return sign | 0x7E00 | static_cast<uint16_t>((magnitude >> 13) & 0x3FF);
  // 65520 = 65504 + half an ulp rounds (to even) up to infinity.
  if (magnitude >= 0x477FF000)
    return sign | 0x7C00;
  if (magnitude >= 0x38800000) { // Normal: >= 2^-14.
    uint32_t half =
        ((magnitude >> 23) - 127 + 15) << 10 | ((magnitude >> 13) & 0x3FF);
    uint32_t rest = magnitude & 0x1FFF;
    if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
      ++half; // A carry into the exponent is the correct next value.
    return sign | static_cast<uint16_t>(half);
  }
  // Subnormal or zero: the result counts units of 2^-24. Below 2^-25 (and at
  // 2^-25 exactly, a tie to the even 0) everything rounds to zero.
  uint32_t exponent = magnitude >> 23;
  if (exponent < 102)
    return sign;
  uint32_t mantissa = (magnitude & 0x7FFFFF) | 0x800000;
  uint32_t shift = 126 - exponent; // 14..24
  uint32_t half = mantissa >> shift;
  uint32_t rest = mantissa & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1)))
    ++half; // May become 0x400, the smallest normal: also correct.
  return sign | static_cast<uint16_t>(half);
}

float halfToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1F;
  uint32_t mantissa = bits & 0x3FF;
  if (exponent == 0x1F) // Inf or NaN.
    return numerics::bitsToFloat(sign | 0x7F800000 | (mantissa << 13));
  if (exponent != 0)
    return numerics::bitsToFloat(sign | ((exponent - 15 + 127) << 23) |
                                 (mantissa << 13));
  if (mantissa == 0)
    return numerics::bitsToFloat(sign);
  // Subnormal: mantissa * 2^-24, normalized for fp32.
  int shift = 0;
  while (!(mantissa & 0x400)) {
    mantissa <<= 1;
    ++shift;
  }
  mantissa &= 0x3FF;
  uint32_t floatExponent = static_cast<uint32_t>(127 - 15 + 1 - shift);
  return numerics::bitsToFloat(sign | (floatExponent << 23) | (mantissa << 13));
}

// BF16 has one definition, the numerics library's (a NaN becomes the
// canonical quiet NaN 0x7FC0/0xFFC0, keeping its sign).
uint16_t floatToBFloat16(float value) { return numerics::encodeBF16(value); }

float bfloat16ToFloat(uint16_t bits) { return numerics::decodeBF16(bits); }

int64_t TensorInfo::numElements() const {
  int64_t count = 1;
  for (int64_t dimension : shape)
    count *= dimension;
  return count;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {

std::string quoted(std::string_view name) {
  return "'" + std::string(name) + "'";
}

std::string offsetsToString(uint64_t begin, uint64_t end) {
  return fmt::format("[{}, {}]", begin, end);
}

/// shape's element count times `elementSize`, or nullopt on overflow
/// (anything beyond 2^62 bytes is not a real tensor).
std::optional<uint64_t> byteCount(const std::vector<int64_t> &shape,
                                  size_t elementSize) {
  constexpr uint64_t kLimit = uint64_t(1) << 62;
  uint64_t bytes = elementSize;
  for (int64_t dimension : shape) {
    uint64_t d = static_cast<uint64_t>(dimension);
    if (d != 0 && bytes > kLimit / d)
      return std::nullopt;
    bytes *= d;
  }
  return bytes;
}

std::string knownDtypes() {
  std::string text;
  for (const DtypeEntry &entry : kDtypes) {
    if (!text.empty())
      text += ", ";
    text += entry.name;
  }
  return text;
}

/// Parses one tensor entry of the header into `info` (name already set).
Status parseTensorEntry(const JsonValue &entry, TensorInfo &info,
                        uint64_t dataSize) {
  std::string what = "tensor " + quoted(info.name);
  if (!entry.isObject())
    return Error(what + ": header entry is " +
                 std::string(JsonValue::kindName(entry.kind())) +
                 ", expected an object with dtype, shape and data_offsets");
  const JsonValue *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
  for (const JsonMember &member : entry.members()) {
    const JsonValue **slot = nullptr;
    if (member.key == "dtype")
      slot = &dtype;
    else if (member.key == "shape")
      slot = &shape;
    else if (member.key == "data_offsets")
      slot = &offsets;
    else
      return Error(what + ": unknown field " + quoted(member.key) +
                   " (expected dtype, shape and data_offsets)");
    if (*slot)
      return Error(what + ": field " + quoted(member.key) +
                   " appears more than once");
    *slot = &member.value;
  }
  if (!dtype)
    return Error(what + ": missing 'dtype'");
  if (!shape)
    return Error(what + ": missing 'shape'");
  if (!offsets)
    return Error(what + ": missing 'data_offsets'");

  if (!dtype->isString())
    return Error(what + ": dtype is " +
                 std::string(JsonValue::kindName(dtype->kind())) +
                 ", expected a string");
  std::optional<Dtype> parsed = parseDtype(dtype->asString());
  if (!parsed)
    return Error(what + ": unknown dtype " + quoted(dtype->asString()) +
                 " (known: " + knownDtypes() + ")");
  info.dtype = *parsed;

  if (!shape->isArray())
    return Error(what + ": shape is " +
                 std::string(JsonValue::kindName(shape->kind())) +
                 ", expected an array of non-negative integers");
  for (const JsonValue &dimension : shape->items()) {
    if (!dimension.isInteger())
      return Error(what + ": shape has a non-integer dimension; expected an "
                          "array of non-negative integers");
    info.shape.push_back(dimension.asInt64());
  }
  for (int64_t dimension : info.shape)
    if (dimension < 0)
      return Error(what + ": shape " + shapeToString(info.shape) +
                   " has a negative dimension");
  std::optional<uint64_t> expectedBytes =
      byteCount(info.shape, dtypeSize(info.dtype));
  if (!expectedBytes)
    return Error(what + ": shape " + shapeToString(info.shape) +
                 " is too large");

  if (!offsets->isArray() || offsets->items().size() != 2 ||
      !offsets->items()[0].isInteger() || !offsets->items()[1].isInteger() ||
      offsets->items()[0].asInt64() < 0 || offsets->items()[1].asInt64() < 0)
    return Error(what + ": data_offsets must be an array of two non-negative "
                        "integers [begin, end]");
  info.dataBegin = static_cast<uint64_t>(offsets->items()[0].asInt64());
  info.dataEnd = static_cast<uint64_t>(offsets->items()[1].asInt64());
  std::string range = offsetsToString(info.dataBegin, info.dataEnd);
  if (info.dataEnd < info.dataBegin)
    return Error(what + ": data_offsets " + range + " end before they begin");
  if (info.dataEnd - info.dataBegin != *expectedBytes)
    return Error(fmt::format(
        "{}: data_offsets {} span {} bytes, but shape {} of {} needs {}", what,
        range, info.dataEnd - info.dataBegin, shapeToString(info.shape),
        std::string(dtypeName(info.dtype)), *expectedBytes));
  if (info.dataEnd > dataSize)
    return Error(
        fmt::format("{}: data_offsets {} extend past the end of the data "
                    "section, which holds {} bytes (truncated file?)",
                    what, range, dataSize));
  return success();
}

} // namespace

Expected<SafetensorsFile> SafetensorsFile::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error(path + ": cannot open: " + std::strerror(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    int error = errno;
    ::close(fd);
    return Error(path + ": cannot stat: " + std::strerror(error));
  }
  if (S_ISDIR(info.st_mode)) {
    ::close(fd);
    return Error(path + ": is a directory, not a safetensors file");
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return Error(path + ": not a regular file");
  }
  uint64_t fileSize = static_cast<uint64_t>(info.st_size);
  if (fileSize < 8) {
    ::close(fd);
    return Error(
        fmt::format("{}: file is {} bytes, too short for a safetensors file "
                    "(which starts with an 8-byte header length)",
                    path, fileSize));
  }
  void *mapping = ::mmap(nullptr, fileSize, PROT_READ, MAP_PRIVATE, fd, 0);
  int mapError = errno;
  ::close(fd);
  if (mapping == MAP_FAILED)
    return Error(path + ": cannot map the file: " + std::strerror(mapError));

  SafetensorsFile file;
  file.path_ = path;
  file.mapping_ = mapping;
  file.mappingSize_ = fileSize;
  const uint8_t *bytes = static_cast<const uint8_t *>(mapping);

  uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i)
    headerSize = headerSize << 8 | bytes[i];
  if (headerSize > fileSize - 8)
    return Error(
        fmt::format("{}: header length {} exceeds the {} bytes after the "
                    "length field (truncated file, or not a safetensors file)",
                    path, headerSize, fileSize - 8));
  if (headerSize > kMaxHeaderBytes)
    return Error(
        fmt::format("{}: header length {} exceeds the limit of {} bytes", path,
                    headerSize, kMaxHeaderBytes));
  std::string_view header(reinterpret_cast<const char *>(bytes + 8),
                          headerSize);
  uint64_t dataSize = fileSize - 8 - headerSize;
  file.dataSection_ = bytes + 8 + headerSize;
  if (Status status = file.parseHeader(header, dataSize); !status)
    return status.error().withContext(path);
  return Expected<SafetensorsFile>(std::move(file));
}

Status SafetensorsFile::parseHeader(std::string_view header,
                                    uint64_t dataSize) {
  JsonParseOptions options;
  options.allowDuplicateKeys = true; // Reported below, by name.
  options.maxDepth = 16;
  Expected<JsonValue> parsed = parseJson(header, options);
  if (!parsed)
    return Error("invalid JSON header: " + parsed.error().message());
  const JsonValue &root = *parsed;
  if (!root.isObject())
    return Error("header is a JSON " +
                 std::string(JsonValue::kindName(root.kind())) +
                 ", expected an object");

  bool seenMetadata = false;
  std::unordered_set<std::string_view> names;
  for (const JsonMember &member : root.members()) {
    if (member.key == "__metadata__") {
      if (seenMetadata)
        return Error("__metadata__ appears more than once in the header");
      seenMetadata = true;
      if (!member.value.isObject())
        return Error("__metadata__ is " +
                     std::string(JsonValue::kindName(member.value.kind())) +
                     ", expected an object of strings");
      for (const JsonMember &entry : member.value.members()) {
        if (!entry.value.isString())
          return Error("__metadata__ entry " + quoted(entry.key) + " is " +
                       std::string(JsonValue::kindName(entry.value.kind())) +
                       "; metadata values must be strings");
        metadata_.emplace_back(entry.key, entry.value.asString());
      }
      continue;
    }
    if (!names.insert(member.key).second)
      return Error("tensor " + quoted(member.key) +
                   " appears more than once in the header");
    TensorInfo info;
    info.name = member.key;
    if (Status status = parseTensorEntry(member.value, info, dataSize); !status)
      return status;
    tensors_.push_back(std::move(info));
  }

  // The tensors must tile the data section: no overlaps, no holes.
  std::vector<const TensorInfo *> byOffset;
  for (const TensorInfo &tensor : tensors_)
    byOffset.push_back(&tensor);
  std::sort(byOffset.begin(), byOffset.end(),
            [](const TensorInfo *a, const TensorInfo *b) {
              return std::make_pair(a->dataBegin, a->dataEnd) <
                     std::make_pair(b->dataBegin, b->dataEnd);
            });
  uint64_t covered = 0;
  const TensorInfo *previous = nullptr;
  for (const TensorInfo *tensor : byOffset) {
    if (tensor->dataBegin < covered)
      return Error("tensors " + quoted(previous->name) + " (data_offsets " +
                   offsetsToString(previous->dataBegin, previous->dataEnd) +
                   ") and " + quoted(tensor->name) + " (data_offsets " +
                   offsetsToString(tensor->dataBegin, tensor->dataEnd) +
                   ") overlap");
    if (tensor->dataBegin > covered)
      return Error(fmt::format("bytes [{}, {}) of the data section belong to "
                               "no tensor (safetensors allows no holes)",
                               covered, tensor->dataBegin));
    covered = tensor->dataEnd;
    previous = tensor;
  }
  if (covered != dataSize)
    return Error(fmt::format("the last {} bytes of the data section belong to "
                             "no tensor (safetensors allows no trailing data)",
                             dataSize - covered));
  return success();
}

SafetensorsFile::SafetensorsFile(SafetensorsFile &&other) noexcept
    : path_(std::move(other.path_)), mapping_(other.mapping_),
      mappingSize_(other.mappingSize_), dataSection_(other.dataSection_),
      tensors_(std::move(other.tensors_)),
      metadata_(std::move(other.metadata_)) {
  other.mapping_ = nullptr;
  other.mappingSize_ = 0;
  other.dataSection_ = nullptr;
}

SafetensorsFile &SafetensorsFile::operator=(SafetensorsFile &&other) noexcept {
  if (this != &other) {
    if (mapping_)
      ::munmap(mapping_, mappingSize_);
    path_ = std::move(other.path_);
    mapping_ = other.mapping_;
    mappingSize_ = other.mappingSize_;
    dataSection_ = other.dataSection_;
    tensors_ = std::move(other.tensors_);
    metadata_ = std::move(other.metadata_);
    other.mapping_ = nullptr;
    other.mappingSize_ = 0;
    other.dataSection_ = nullptr;
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_)
    ::munmap(mapping_, mappingSize_);
}

const TensorInfo *SafetensorsFile::find(std::string_view name) const {
  for (const TensorInfo &tensor : tensors_)
    if (tensor.name == name)
      return &tensor;
  return nullptr;
}

Expected<std::vector<float>>
SafetensorsFile::readFloats(const TensorInfo &tensor) const {
  if (!isFloatDtype(tensor.dtype))
    return Error(path_ + ": tensor " + quoted(tensor.name) + " has dtype " +
                 std::string(dtypeName(tensor.dtype)) +
                 "; only F32, F16 and BF16 tensors convert to float");
  size_t count = static_cast<size_t>(tensor.numElements());
  std::vector<float> values(count);
  const uint8_t *bytes = data(tensor);
  switch (tensor.dtype) {
  case Dtype::F32:
    if (count)
      std::memcpy(values.data(), bytes, count * sizeof(float));
    break;
  case Dtype::F16:
  case Dtype::BF16: {
    bool isHalf = tensor.dtype == Dtype::F16;
    for (size_t i = 0; i < count; ++i) {
      uint16_t bits;
      std::memcpy(&bits, bytes + 2 * i, sizeof(bits));
      values[i] = isHalf ? halfToFloat(bits) : bfloat16ToFloat(bits);
    }
    break;
  }
  default:
    break;
  }
  return values;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

void SafetensorsWriter::setMetadata(std::string key, std::string value) {
  for (auto &entry : metadata_) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

Status SafetensorsWriter::addTensor(std::string name, Dtype dtype,
                                    std::vector<int64_t> shape,
                                    std::vector<uint8_t> bytes) {
  std::string what = "tensor " + quoted(name);
  if (name == "__metadata__")
    return Error(what + ": the name is reserved for the header's metadata");
  for (const Entry &entry : tensors_)
    if (entry.name == name)
      return Error(what + ": a tensor of that name was already added");
  for (int64_t dimension : shape)
    if (dimension < 0)
      return Error(what + ": shape " + shapeToString(shape) +
                   " has a negative dimension");
  std::optional<uint64_t> expected = byteCount(shape, dtypeSize(dtype));
  if (!expected)
    return Error(what + ": shape " + shapeToString(shape) + " is too large");
  if (*expected != bytes.size())
    return Error(fmt::format(
        "{}: {} bytes of data, but shape {} of {} needs {}", what, bytes.size(),
        shapeToString(shape), std::string(dtypeName(dtype)), *expected));
  tensors_.push_back(
      Entry{std::move(name), dtype, std::move(shape), std::move(bytes)});
  return success();
}

Status SafetensorsWriter::addTensor(std::string name, Dtype dtype,
                                    std::vector<int64_t> shape,
                                    const void *data, size_t numBytes) {
  const uint8_t *begin = static_cast<const uint8_t *>(data);
  return addTensor(std::move(name), dtype, std::move(shape),
                   std::vector<uint8_t>(begin, begin + numBytes));
}

Status SafetensorsWriter::addFloatTensor(std::string name, Dtype dtype,
                                         std::vector<int64_t> shape,
                                         const float *data, size_t count) {
  if (!isFloatDtype(dtype))
    return Error("tensor " + quoted(name) + ": cannot store floats as " +
                 std::string(dtypeName(dtype)));
  std::vector<uint8_t> bytes(count * dtypeSize(dtype));
  if (dtype == Dtype::F32) {
    if (count)
      std::memcpy(bytes.data(), data, count * sizeof(float));
  } else {
    bool isHalf = dtype == Dtype::F16;
    for (size_t i = 0; i < count; ++i) {
      uint16_t bits = isHalf ? floatToHalf(data[i]) : floatToBFloat16(data[i]);
      std::memcpy(bytes.data() + 2 * i, &bits, sizeof(bits));
    }
  }
  return addTensor(std::move(name), dtype, std::move(shape), std::move(bytes));
}

std::vector<size_t> SafetensorsWriter::dataOrder() const {
  // Widest elements first, otherwise in the order added: with the data
  // section 8-byte aligned, every tensor then starts at a multiple of its
  // element size, as the reference writer arranges it.
  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    size_t sizeA = dtypeSize(tensors_[a].dtype);
    size_t sizeB = dtypeSize(tensors_[b].dtype);
    return sizeA != sizeB ? sizeA > sizeB : a < b;
  });
  return order;
}

std::string SafetensorsWriter::header() const {
  std::vector<uint64_t> begins(tensors_.size());
  uint64_t offset = 0;
  for (size_t index : dataOrder()) {
    begins[index] = offset;
    offset += tensors_[index].bytes.size();
  }
  JsonValue root = JsonValue::object();
  if (!metadata_.empty()) {
    JsonValue metadata = JsonValue::object();
    for (const auto &entry : metadata_)
      metadata.set(entry.first, JsonValue::string(entry.second));
    root.set("__metadata__", std::move(metadata));
  }
  for (size_t index = 0; index < tensors_.size(); ++index) {
    const Entry &entry = tensors_[index];
    JsonValue tensor = JsonValue::object();
    tensor.set("dtype", JsonValue::string(std::string(dtypeName(entry.dtype))));
    JsonValue shape = JsonValue::array();
    for (int64_t dimension : entry.shape)
      shape.push(JsonValue::integer(dimension));
    tensor.set("shape", std::move(shape));
    JsonValue offsets = JsonValue::array();
    uint64_t begin = begins[index];
    offsets.push(JsonValue::integer(static_cast<int64_t>(begin)));
    offsets.push(
        JsonValue::integer(static_cast<int64_t>(begin + entry.bytes.size())));
    tensor.set("data_offsets", std::move(offsets));
    root.members().push_back(JsonMember{entry.name, std::move(tensor)});
  }
  std::string text = writeJson(root);
  // Pad so that the data section starts on an 8-byte boundary.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

Status SafetensorsWriter::write(const std::string &path) const {
  std::string headerText = header();
  uint8_t length[8];
  uint64_t size = headerText.size();
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<uint8_t>(size >> (8 * i));

  Expected<AtomicFileWriter> file = AtomicFileWriter::create(path);
  if (!file)
    return file.error();
  if (Status status = file->write(length, sizeof(length)); !status)
    return status;
  if (Status status = file->write(headerText); !status)
    return status;
  for (size_t index : dataOrder()) {
    const Entry &entry = tensors_[index];
    if (Status status = file->write(entry.bytes.data(), entry.bytes.size());
        !status)
      return status;
  }
  return file->commit();
}

} // namespace tetra::io
