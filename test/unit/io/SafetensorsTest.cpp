//===- SafetensorsTest.cpp - Reading, writing and validating --------------===//

#include "runtime/io/Safetensors.h"
#include "runtime/io/AtomicFile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace tetra::io;

namespace {

::testing::AssertionResult contains(const std::string &text,
                                    const std::string &part) {
  if (text.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << text << "\" does not contain \"" << part << "\"";
}

float bitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint32_t floatToBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

/// A fresh directory per test, removed with its files afterwards.
class TempDir {
public:
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base && *base ? base : "/tmp") + "/tetra-io-test.XXXXXX";
    path_ = pattern;
    if (!::mkdtemp(path_.data()))
      ADD_FAILURE() << "mkdtemp failed";
  }
  ~TempDir() {
    for (const std::string &name : list())
      removeTree(path_ + "/" + name);
    ::rmdir(path_.c_str());
  }
  std::string file(const std::string &name) const { return path_ + "/" + name; }
  const std::string &path() const { return path_; }

  /// The names in the directory, hidden ones included.
  std::vector<std::string> list() const {
    std::vector<std::string> names;
    if (DIR *dir = ::opendir(path_.c_str())) {
      while (dirent *entry = ::readdir(dir)) {
        std::string name = entry->d_name;
        if (name != "." && name != "..")
          names.push_back(name);
      }
      ::closedir(dir);
    }
    return names;
  }

private:
  static void removeTree(const std::string &path) {
    struct stat info;
    if (::lstat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
      if (DIR *dir = ::opendir(path.c_str())) {
        while (dirent *entry = ::readdir(dir)) {
          std::string name = entry->d_name;
          if (name != "." && name != "..")
            removeTree(path + "/" + name);
        }
        ::closedir(dir);
      }
      ::rmdir(path.c_str());
    } else {
      ::unlink(path.c_str());
    }
  }
  std::string path_;
};

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

/// A safetensors file: the length of `header`, `header`, then `data`.
std::string fileBytes(const std::string &header, const std::string &data,
                      uint64_t headerLength = UINT64_MAX) {
  uint64_t length = headerLength == UINT64_MAX ? header.size() : headerLength;
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>(length >> (8 * i));
  return bytes + header + data;
}

/// Opens a file made of `header` and `data` and returns the error message
/// ("" if it opened).
std::string openError(const TempDir &dir, const std::string &header,
                      const std::string &data,
                      uint64_t headerLength = UINT64_MAX) {
  std::string path = dir.file("bad.safetensors");
  writeBytes(path, fileBytes(header, data, headerLength));
  Expected<SafetensorsFile> file = SafetensorsFile::open(path);
  if (file)
    return "";
  EXPECT_TRUE(contains(file.error().message(), path + ": "))
      << "the message must name the file";
  return file.error().message();
}

//===----------------------------------------------------------------------===//
// F16 and BF16 conversions
//===----------------------------------------------------------------------===//

TEST(HalfTest, ExactValues) {
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);              // Largest finite.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14)), 0x0400); // Smallest normal.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001); // Smallest subnormal.
  EXPECT_EQ(floatToHalf(std::ldexp(1023.0f, -24)), 0x03FF); // Largest one.
  EXPECT_EQ(floatToHalf(INFINITY), 0x7C00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xFC00);
}

TEST(HalfTest, Rounding) {
  // Ties to even in the normal range: 1 + 2^-11 lies halfway between 1 and
  // 1 + 2^-10.
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(floatToHalf(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)),
            0x3C01);
  // Overflow: 65520 is the midpoint to the next binade: ties to even (up).
  EXPECT_EQ(floatToHalf(65519.996f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00);
  EXPECT_EQ(floatToHalf(-65520.0f), 0xFC00);
  EXPECT_EQ(floatToHalf(1e10f), 0x7C00);
  // Underflow: 2^-25 is the midpoint between 0 and 2^-24: ties to even (0).
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(floatToHalf(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(floatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002); // 1.5 ulp -> 2.
  EXPECT_EQ(floatToHalf(std::ldexp(5.0f, -25)), 0x0002); // 2.5 ulp -> 2.
  EXPECT_EQ(floatToHalf(1e-30f), 0x0000);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  // Rounding up out of the subnormals into the smallest normal.
  EXPECT_EQ(floatToHalf(std::ldexp(1023.5f, -24)), 0x0400);
}

TEST(HalfTest, NaN) {
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
  EXPECT_EQ(floatToHalf(bitsToFloat(0x7FC00000)), 0x7E00);
  EXPECT_EQ(floatToHalf(bitsToFloat(0xFFC00000)), 0xFE00);
  // A signalling NaN whose payload sits below the half's mantissa stays a
  // NaN (quieted), never becomes infinity.
  EXPECT_EQ(floatToHalf(bitsToFloat(0x7F800001)) & 0x7E00, 0x7E00);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7C01)));
  EXPECT_TRUE(std::isnan(halfToFloat(0xFE00)));
}

TEST(HalfTest, EveryHalfRoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t half = static_cast<uint16_t>(bits);
    float value = halfToFloat(half);
    if ((half & 0x7C00) == 0x7C00 && (half & 0x3FF)) {
      EXPECT_TRUE(std::isnan(value));
      continue;
    }
    ASSERT_EQ(floatToHalf(value), half) << "half 0x" << std::hex << bits;
  }
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfToFloat(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(halfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(halfToFloat(0x3555), 0.333251953125f);
}

TEST(HalfTest, EveryMidpointRoundsToEven) {
  // Between every two neighbouring positive halves: the midpoint (exact in
  // fp32) goes to the even one, anything above it up, below it down.
  for (uint16_t low = 0; low < 0x7BFF; ++low) {
    uint16_t high = low + 1;
    float a = halfToFloat(low), b = halfToFloat(high);
    float mid = a + (b - a) / 2;
    uint16_t even = (low & 1) ? high : low;
    ASSERT_EQ(floatToHalf(mid), even) << "between 0x" << std::hex << low;
    ASSERT_EQ(floatToHalf(std::nextafter(mid, INFINITY)), high);
    ASSERT_EQ(floatToHalf(std::nextafter(mid, -INFINITY)), low);
    ASSERT_EQ(floatToHalf(-mid), even | 0x8000);
  }
}

TEST(BFloat16Test, Conversions) {
  EXPECT_EQ(floatToBFloat16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBFloat16(-0.0f), 0x8000);
  EXPECT_EQ(bfloat16ToFloat(0x3F80), 1.0f);
  // Ties to even.
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x3F808000)), 0x3F80);
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x3F818000)), 0x3F82);
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x3F808001)), 0x3F81);
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x3F807FFF)), 0x3F80);
  // The largest finite BF16, and overflow to infinity at its midpoint.
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x7F7F8000)), 0x7F80);
  EXPECT_EQ(floatToBFloat16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(floatToBFloat16(INFINITY), 0x7F80);
  EXPECT_EQ(floatToBFloat16(-INFINITY), 0xFF80);
  // Subnormals round like everything else.
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x00018000)), 0x0002);
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x00008000)), 0x0000);
  // NaN stays NaN, even one whose payload lies in the low 16 bits.
  EXPECT_EQ(floatToBFloat16(bitsToFloat(0x7FC00000)), 0x7FC0);
  EXPECT_TRUE(
      std::isnan(bfloat16ToFloat(floatToBFloat16(bitsToFloat(0x7F800001)))));
  EXPECT_TRUE(
      std::isnan(bfloat16ToFloat(floatToBFloat16(bitsToFloat(0xFF800001)))));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t value = static_cast<uint16_t>(bits);
    if ((value & 0x7F80) == 0x7F80 && (value & 0x7F))
      continue; // NaN
    ASSERT_EQ(floatToBFloat16(bfloat16ToFloat(value)), value);
    ASSERT_EQ(floatToBits(bfloat16ToFloat(value)), bits << 16);
  }
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

TEST(SafetensorsTest, RoundTripEveryDtype) {
  TempDir dir;
  std::vector<float> floats = {
      0.0f,  -0.0f,    1.0f,     -2.5f,
      1e-3f, 3.14159f, 65504.0f, std::ldexp(1.0f, -24)};
  std::vector<uint8_t> bytes = {0, 1, 127, 128, 255, 42};
  std::vector<int32_t> ints = {0, -1, INT32_MAX, INT32_MIN};
  std::vector<int64_t> longs = {0, -1, INT64_MAX, INT64_MIN, 1ll << 53};
  std::vector<double> doubles = {0.1, -1e300};

  SafetensorsWriter writer;
  writer.setMetadata("format", "pt");
  writer.setMetadata("note", "quoted \"text\"\nwith a newline");
  ASSERT_TRUE(writer.addFloatTensor("f32", Dtype::F32, {2, 4}, floats.data(),
                                    floats.size()));
  ASSERT_TRUE(writer.addFloatTensor("f16", Dtype::F16, {8}, floats.data(),
                                    floats.size()));
  ASSERT_TRUE(writer.addFloatTensor("bf16", Dtype::BF16, {4, 2}, floats.data(),
                                    floats.size()));
  ASSERT_TRUE(
      writer.addTensor("u8", Dtype::U8, {2, 3}, bytes.data(), bytes.size()));
  ASSERT_TRUE(writer.addTensor("i32", Dtype::I32, {4}, ints.data(),
                               ints.size() * sizeof(int32_t)));
  ASSERT_TRUE(writer.addTensor("i64", Dtype::I64, {5}, longs.data(),
                               longs.size() * sizeof(int64_t)));
  ASSERT_TRUE(writer.addTensor("f64", Dtype::F64, {2}, doubles.data(),
                               doubles.size() * sizeof(double)));
  float scalar = 0.75f;
  ASSERT_TRUE(writer.addTensor("scalar", Dtype::F32, {}, &scalar, 4));
  ASSERT_TRUE(writer.addTensor("empty", Dtype::BF16, {0, 16}, nullptr, 0));
  ASSERT_TRUE(writer.addTensor("name with \"quotes\" and \xC3\xA9", Dtype::Bool,
                               {1}, "\x01", 1));
  std::string path = dir.file("all.safetensors");
  ASSERT_TRUE(writer.write(path));

  Expected<SafetensorsFile> opened = SafetensorsFile::open(path);
  ASSERT_TRUE(opened.ok()) << opened.error().message();
  const SafetensorsFile &file = *opened;
  ASSERT_EQ(file.tensors().size(), 10u);
  // Header order is the order added.
  EXPECT_EQ(file.tensors()[0].name, "f32");
  EXPECT_EQ(file.tensors()[9].name, "name with \"quotes\" and \xC3\xA9");
  ASSERT_EQ(file.metadata().size(), 2u);
  EXPECT_EQ(file.metadata()[1].second, "quoted \"text\"\nwith a newline");

  const TensorInfo *f32 = file.find("f32");
  ASSERT_NE(f32, nullptr);
  EXPECT_EQ(f32->dtype, Dtype::F32);
  EXPECT_EQ(f32->shape, (std::vector<int64_t>{2, 4}));
  Expected<std::vector<float>> f32Values = file.readFloats(*f32);
  ASSERT_TRUE(f32Values.ok());
  for (size_t i = 0; i < floats.size(); ++i)
    EXPECT_EQ(floatToBits((*f32Values)[i]), floatToBits(floats[i]));

  // F16 and BF16 hold the values rounded to nearest even.
  Expected<std::vector<float>> f16Values = file.readFloats(*file.find("f16"));
  Expected<std::vector<float>> bf16Values = file.readFloats(*file.find("bf16"));
  ASSERT_TRUE(f16Values.ok() && bf16Values.ok());
  for (size_t i = 0; i < floats.size(); ++i) {
    EXPECT_EQ((*f16Values)[i], halfToFloat(floatToHalf(floats[i])));
    EXPECT_EQ((*bf16Values)[i], bfloat16ToFloat(floatToBFloat16(floats[i])));
  }
  EXPECT_EQ((*f16Values)[6], 65504.0f);
  EXPECT_TRUE(std::signbit((*f16Values)[1]));

  const TensorInfo *u8 = file.find("u8");
  EXPECT_EQ(std::memcmp(file.data(*u8), bytes.data(), bytes.size()), 0);
  EXPECT_EQ(u8->numBytes(), 6u);
  const TensorInfo *i32 = file.find("i32");
  std::vector<int32_t> readInts(4);
  std::memcpy(readInts.data(), file.data(*i32), 16);
  EXPECT_EQ(readInts, ints);
  const TensorInfo *i64 = file.find("i64");
  std::vector<int64_t> readLongs(5);
  std::memcpy(readLongs.data(), file.data(*i64), 40);
  EXPECT_EQ(readLongs, longs);
  const TensorInfo *f64 = file.find("f64");
  double readDouble;
  std::memcpy(&readDouble, file.data(*f64), 8);
  EXPECT_EQ(readDouble, 0.1);

  const TensorInfo *scalarInfo = file.find("scalar");
  EXPECT_TRUE(scalarInfo->shape.empty());
  EXPECT_EQ(scalarInfo->numElements(), 1);
  EXPECT_EQ((*file.readFloats(*scalarInfo))[0], 0.75f);
  const TensorInfo *empty = file.find("empty");
  EXPECT_EQ(empty->numElements(), 0);
  EXPECT_TRUE(file.readFloats(*empty)->empty());

  // Non-float tensors do not read as floats.
  Expected<std::vector<float>> notFloat = file.readFloats(*i32);
  ASSERT_FALSE(notFloat.ok());
  EXPECT_TRUE(contains(notFloat.error().message(), "has dtype I32"));
  EXPECT_EQ(file.find("nope"), nullptr);
}

TEST(SafetensorsTest, LayoutIsAligned) {
  TempDir dir;
  SafetensorsWriter writer;
  uint8_t byte = 7;
  float value = 1.0f;
  int64_t wide = 5;
  uint16_t half = 0x3C00;
  ASSERT_TRUE(writer.addTensor("b", Dtype::U8, {1}, &byte, 1));
  ASSERT_TRUE(writer.addTensor("h", Dtype::F16, {1}, &half, 2));
  ASSERT_TRUE(writer.addTensor("f", Dtype::F32, {1}, &value, 4));
  ASSERT_TRUE(writer.addTensor("w", Dtype::I64, {1}, &wide, 8));
  EXPECT_EQ(writer.header().size() % 8, 0u);
  std::string path = dir.file("aligned.safetensors");
  ASSERT_TRUE(writer.write(path));
  Expected<SafetensorsFile> file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  for (const TensorInfo &tensor : file->tensors())
    EXPECT_EQ(tensor.dataBegin % dtypeSize(tensor.dtype), 0u) << tensor.name;
  EXPECT_EQ(file->find("w")->dataBegin, 0u);
  EXPECT_EQ(file->find("b")->dataBegin, 14u);
}

TEST(SafetensorsTest, ReadsHandWrittenFiles) {
  // As other writers produce them: header padded with spaces, keys in any
  // order, metadata last, data in another order than the header.
  TempDir dir;
  std::string header =
      R"({"b":{"shape":[2],"dtype":"BF16","data_offsets":[0,4]},)"
      R"("a":{"data_offsets":[4,8],"dtype":"F32","shape":[1]},)"
      R"("__metadata__":{"format":"pt"}}   )";
  std::string data("\x80\x3f\x00\xc0\x00\x00\x80\x3f", 8);
  std::string path = dir.file("hand.safetensors");
  writeBytes(path, fileBytes(header, data));
  Expected<SafetensorsFile> file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ(file->tensors()[0].name, "b");
  EXPECT_EQ(*file->readFloats(*file->find("b")), (std::vector<float>{1, -2}));
  EXPECT_EQ(*file->readFloats(*file->find("a")), (std::vector<float>{1}));
  EXPECT_EQ(file->metadata()[0].first, "format");

  // The smallest valid file: an empty header object.
  writeBytes(path, fileBytes("{}", ""));
  Expected<SafetensorsFile> empty = SafetensorsFile::open(path);
  ASSERT_TRUE(empty.ok()) << empty.error().message();
  EXPECT_TRUE(empty->tensors().empty());
}

//===----------------------------------------------------------------------===//
// Malformed files: every error names the file and says what is wrong
//===----------------------------------------------------------------------===//

TEST(SafetensorsErrorTest, NotAFile) {
  TempDir dir;
  Expected<SafetensorsFile> missing =
      SafetensorsFile::open(dir.file("missing.safetensors"));
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(contains(missing.error().message(),
                       "missing.safetensors: cannot open: No such file"));
  Expected<SafetensorsFile> directory = SafetensorsFile::open(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_TRUE(contains(directory.error().message(), "is a directory"));
}

TEST(SafetensorsErrorTest, TooShort) {
  TempDir dir;
  std::string path = dir.file("short.safetensors");
  for (size_t size : {0, 1, 7}) {
    writeBytes(path, std::string(size, '\0'));
    Expected<SafetensorsFile> file = SafetensorsFile::open(path);
    ASSERT_FALSE(file.ok());
    EXPECT_TRUE(
        contains(file.error().message(),
                 "file is " + std::to_string(size) + " bytes, too short"));
  }
}

TEST(SafetensorsErrorTest, HeaderLength) {
  TempDir dir;
  const std::string header =
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  EXPECT_EQ(openError(dir, header, "x"), "");
  EXPECT_TRUE(contains(openError(dir, header, "x", header.size() + 2),
                       "header length " + std::to_string(header.size() + 2) +
                           " exceeds the " + std::to_string(header.size() + 1) +
                           " bytes after the length field"));
  EXPECT_TRUE(
      contains(openError(dir, header, "x", UINT64_MAX - 1), "exceeds the"));
  // A header cut short by the length: the JSON is incomplete (here inside
  // the string that starts at byte 6).
  EXPECT_TRUE(contains(openError(dir, header, "x", 10),
                       "invalid JSON header: line 1, column 7 (byte 6): "
                       "unterminated string"));
}

TEST(SafetensorsErrorTest, BadJson) {
  TempDir dir;
  EXPECT_TRUE(contains(openError(dir, R"({"a":})", ""),
                       "invalid JSON header: line 1, column 6 (byte 5): "
                       "expected a JSON value, found '}'"));
  EXPECT_TRUE(contains(openError(dir, "\xFF\xFF", ""), "invalid JSON header"));
  EXPECT_TRUE(contains(openError(dir, R"([1,2])", ""),
                       "header is a JSON array, expected an object"));
  EXPECT_TRUE(contains(openError(dir, R"("x")", ""),
                       "header is a JSON string, expected an object"));
  EXPECT_TRUE(contains(openError(dir, "", ""), "invalid JSON header"));
}

TEST(SafetensorsErrorTest, BadEntries) {
  TempDir dir;
  auto entry = [&](const std::string &body, const std::string &data = "") {
    return openError(dir, "{\"t\":" + body + "}", data);
  };
  EXPECT_TRUE(contains(entry("[1]"), "tensor 't': header entry is array"));
  EXPECT_TRUE(contains(entry(R"({"shape":[1],"data_offsets":[0,4]})"),
                       "tensor 't': missing 'dtype'"));
  EXPECT_TRUE(contains(entry(R"({"dtype":"F32","data_offsets":[0,4]})"),
                       "missing 'shape'"));
  EXPECT_TRUE(contains(entry(R"({"dtype":"F32","shape":[1]})"),
                       "missing 'data_offsets'"));
  EXPECT_TRUE(contains(
      entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1})"),
      "unknown field 'x'"));
  EXPECT_TRUE(contains(
      entry(
          R"({"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]})"),
      "field 'dtype' appears more than once"));
  EXPECT_TRUE(contains(entry(R"({"dtype":7,"shape":[1],"data_offsets":[0,4]})"),
                       "dtype is number, expected a string"));
  EXPECT_TRUE(
      contains(entry(R"({"dtype":"F9","shape":[1],"data_offsets":[0,4]})"),
               "tensor 't': unknown dtype 'F9' (known: BOOL, U8"));
  EXPECT_TRUE(
      contains(entry(R"({"dtype":"F32","shape":"1","data_offsets":[0,4]})"),
               "shape is string"));
  EXPECT_TRUE(
      contains(entry(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})"),
               "non-integer dimension"));
  EXPECT_TRUE(
      contains(entry(R"({"dtype":"F32","shape":[2,-3],"data_offsets":[0,4]})"),
               "tensor 't': shape [2, -3] has a negative dimension"));
  EXPECT_TRUE(contains(
      entry(
          R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})"),
      "is too large"));
  EXPECT_TRUE(
      contains(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4,8]})"),
               "data_offsets must be an array of two non-negative integers"));
  EXPECT_TRUE(
      contains(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[-4,0]})"),
               "data_offsets must be an array of two"));
  EXPECT_TRUE(
      contains(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})"),
               "data_offsets [8, 4] end before they begin"));
  EXPECT_TRUE(contains(
      entry(R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,20]})",
            std::string(20, '\0')),
      "tensor 't': data_offsets [0, 20] span 20 bytes, but shape [2, 3] of "
      "F32 needs 24"));
}

TEST(SafetensorsErrorTest, TruncatedData) {
  TempDir dir;
  std::string header =
      R"({"t":{"dtype":"F32","shape":[4,4],"data_offsets":[0,64]}})";
  EXPECT_EQ(openError(dir, header, std::string(64, '\0')), "");
  EXPECT_TRUE(contains(openError(dir, header, std::string(63, '\0')),
                       "tensor 't': data_offsets [0, 64] extend past the end "
                       "of the data section, which holds 63 bytes "
                       "(truncated file?)"));
  EXPECT_TRUE(contains(openError(dir, header, ""), "holds 0 bytes"));
}

TEST(SafetensorsErrorTest, OverlapsHolesAndTrailingBytes) {
  TempDir dir;
  EXPECT_TRUE(contains(
      openError(dir,
                R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})",
                std::string(12, 'x')),
      "tensors 'a' (data_offsets [0, 8]) and 'b' (data_offsets [4, 12]) "
      "overlap"));
  EXPECT_TRUE(contains(
      openError(dir,
                R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                R"("b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                std::string(4, 'x')),
      "overlap"));
  EXPECT_TRUE(contains(
      openError(dir,
                R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                R"("b":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}})",
                std::string(10, 'x')),
      "bytes [4, 6) of the data section belong to no tensor"));
  EXPECT_TRUE(contains(
      openError(dir, R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                std::string(6, 'x')),
      "bytes [0, 2) of the data section belong to no tensor"));
  EXPECT_TRUE(contains(
      openError(dir, R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                std::string(7, 'x')),
      "the last 3 bytes of the data section belong to no tensor"));
}

TEST(SafetensorsErrorTest, DuplicateNamesAndMetadata) {
  TempDir dir;
  EXPECT_TRUE(contains(
      openError(dir,
                R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                "xy"),
      "tensor 'a' appears more than once in the header"));
  EXPECT_TRUE(contains(openError(dir, R"({"__metadata__":[]})", ""),
                       "__metadata__ is array, expected an object of strings"));
  EXPECT_TRUE(contains(openError(dir, R"({"__metadata__":{"k":1}})", ""),
                       "__metadata__ entry 'k' is number; metadata values "
                       "must be strings"));
  EXPECT_TRUE(
      contains(openError(dir, R"({"__metadata__":{},"__metadata__":{}})", ""),
               "__metadata__ appears more than once"));
}

//===----------------------------------------------------------------------===//
// The writer's checks and atomicity
//===----------------------------------------------------------------------===//

TEST(SafetensorsWriterTest, RejectsBadTensors) {
  SafetensorsWriter writer;
  uint8_t bytes[4] = {};
  ASSERT_TRUE(writer.addTensor("a", Dtype::U8, {4}, bytes, 4));
  Status duplicate = writer.addTensor("a", Dtype::U8, {4}, bytes, 4);
  ASSERT_FALSE(duplicate.ok());
  EXPECT_TRUE(contains(duplicate.error().message(), "already added"));
  Status reserved = writer.addTensor("__metadata__", Dtype::U8, {4}, bytes, 4);
  ASSERT_FALSE(reserved.ok());
  EXPECT_TRUE(contains(reserved.error().message(), "reserved"));
  Status negative = writer.addTensor("n", Dtype::U8, {-4}, bytes, 4);
  ASSERT_FALSE(negative.ok());
  EXPECT_TRUE(contains(negative.error().message(), "negative dimension"));
  Status size = writer.addTensor("s", Dtype::F32, {2}, bytes, 4);
  ASSERT_FALSE(size.ok());
  EXPECT_TRUE(contains(size.error().message(),
                       "4 bytes of data, but shape [2] of F32 needs 8"));
  float value = 1;
  Status notFloat = writer.addFloatTensor("u", Dtype::U8, {1}, &value, 1);
  ASSERT_FALSE(notFloat.ok());
  EXPECT_TRUE(
      contains(notFloat.error().message(), "cannot store floats as U8"));
  EXPECT_EQ(writer.numTensors(), 1u);
}

TEST(SafetensorsWriterTest, FailedWriteLeavesNothing) {
  TempDir dir;
  SafetensorsWriter writer;
  uint8_t byte = 1;
  ASSERT_TRUE(writer.addTensor("a", Dtype::U8, {1}, &byte, 1));

  // A directory that does not exist.
  Status missingDir = writer.write(dir.file("no/such/dir/out.safetensors"));
  ASSERT_FALSE(missingDir.ok());
  EXPECT_TRUE(
      contains(missingDir.error().message(), "cannot create a temporary file"));

  // The destination is a directory: nothing replaces it, nothing is left.
  std::string taken = dir.file("taken.safetensors");
  ASSERT_EQ(::mkdir(taken.c_str(), 0755), 0);
  Status onDirectory = writer.write(taken);
  ASSERT_FALSE(onDirectory.ok());
  EXPECT_TRUE(contains(onDirectory.error().message(), "is a directory"));
  struct stat info;
  ASSERT_EQ(::stat(taken.c_str(), &info), 0);
  EXPECT_TRUE(S_ISDIR(info.st_mode));
  EXPECT_EQ(dir.list(), std::vector<std::string>{"taken.safetensors"});
}

TEST(SafetensorsWriterTest, FailureMidWriteKeepsTheOldFile) {
  TempDir dir;
  std::string path = dir.file("out.safetensors");
  writeBytes(path, "previous contents");

  SafetensorsWriter writer;
  std::vector<float> big(1 << 18, 1.0f); // 1 MiB of data.
  ASSERT_TRUE(writer.addFloatTensor("big", Dtype::F32, {1 << 18}, big.data(),
                                    big.size()));
  // Make the write itself fail: a file-size limit (EFBIG) below the output.
  rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit limited = old;
  limited.rlim_cur = 64 * 1024;
  auto previousHandler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  Status status = writer.write(path);
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previousHandler);

  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(contains(status.error().message(), path + ": write failed"));
  EXPECT_EQ(readBytes(path), "previous contents");
  EXPECT_EQ(dir.list(), std::vector<std::string>{"out.safetensors"});

  // Without the limit the same write replaces the file.
  ASSERT_TRUE(writer.write(path));
  EXPECT_EQ(dir.list(), std::vector<std::string>{"out.safetensors"});
  Expected<SafetensorsFile> file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ(file->find("big")->numElements(), 1 << 18);
}

TEST(AtomicFileTest, UncommittedWriterLeavesNothing) {
  TempDir dir;
  std::string path = dir.file("out.bin");
  {
    Expected<AtomicFileWriter> writer = AtomicFileWriter::create(path);
    ASSERT_TRUE(writer.ok()) << writer.error().message();
    ASSERT_TRUE(writer->write("partial"));
    // The temporary lives beside the destination, hidden.
    EXPECT_EQ(writer->temporaryPath().rfind(dir.path() + "/.out.bin.tmp.", 0),
              0u);
  }
  EXPECT_TRUE(dir.list().empty());

  writeBytes(path, "old");
  {
    Expected<AtomicFileWriter> writer = AtomicFileWriter::create(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->write("new"));
    EXPECT_EQ(readBytes(path), "old"); // Not until commit().
    ASSERT_TRUE(writer->commit());
  }
  EXPECT_EQ(readBytes(path), "new");
  EXPECT_EQ(dir.list(), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFileTest, PermissionsFollowTheUmask) {
  TempDir dir;
  std::string path = dir.file("perm.bin");
  mode_t old = ::umask(022);
  ASSERT_TRUE(writeFileAtomically(path, "x"));
  ::umask(old);
  struct stat info;
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0644u);
}

} // namespace
