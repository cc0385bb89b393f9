//===- Checkpoint.cpp - Training state in safetensors ---------------------===//

#include "runtime/checkpoint/Checkpoint.h"

#include "runtime/io/AtomicFile.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <sstream>
#include <sys/stat.h>
#include <zlib.h>

namespace tetra::checkpoint {

using io::Error;
using io::Expected;
using io::Status;

namespace {

const char kPrefixM[] = "optimizer.m.";
const char kPrefixV[] = "optimizer.v.";

/// "step_00000100.safetensors" (any number of digits).
bool isCheckpointFileName(const std::string &name) {
  const std::string prefix = "step_", suffix = ".safetensors";
  if (name.size() <= prefix.size() + suffix.size() ||
      name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  return std::all_of(name.begin() + prefix.size(),
                     name.end() - suffix.size(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

std::string hex32(uint32_t value) {
  return fmt::format("{:08x}", value);
}

bool parseI64(const std::string &text, int64_t &out) {
  if (text.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno || *end)
    return false;
  out = v;
  return true;
}

bool parseU64(const std::string &text, uint64_t &out) {
  if (text.empty() || text[0] == '-')
    return false;
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno || *end)
    return false;
  out = v;
  return true;
}

std::string joinPath(const std::string &dir, const std::string &name) {
  if (dir.empty())
    return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

} // namespace

const Tensor *TrainingState::find(const std::vector<Tensor> &list,
                                  const std::string &name) {
  for (const Tensor &t : list)
    if (t.name == name)
      return &t;
  return nullptr;
}

namespace {
/// CRC-32 over (stored name, tensor) pairs sorted by name.
uint32_t checksumNamed(
    std::vector<std::pair<std::string, const Tensor *>> named) {
  std::sort(named.begin(), named.end(),
            [](const auto &a, const auto &b) { return a.first < b.first; });
  uLong crc = ::crc32(0L, Z_NULL, 0);
  auto add = [&](const void *data, size_t size) {
    const Bytef *p = static_cast<const Bytef *>(data);
    while (size > 0) {
      uInt chunk = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
      crc = ::crc32(crc, p, chunk);
      p += chunk;
      size -= chunk;
    }
  };
  const char nul = 0;
  for (const auto &[name, t] : named) {
    add(name.data(), name.size());
    add(&nul, 1);
    std::string_view dtype = io::dtypeName(t->dtype);
    add(dtype.data(), dtype.size());
    add(&nul, 1);
    std::string shape = io::shapeToString(t->shape);
    add(shape.data(), shape.size());
    add(&nul, 1);
    add(t->bytes.data(), t->bytes.size());
  }
  return static_cast<uint32_t>(crc);
}
} // namespace

uint32_t checksumTensors(const std::vector<const Tensor *> &tensors) {
  std::vector<std::pair<std::string, const Tensor *>> named;
  for (const Tensor *t : tensors)
    named.emplace_back(t->name, t);
  return checksumNamed(std::move(named));
}

std::string checkpointFileName(int64_t step) {
  return fmt::format("step_{:08}.safetensors", step);
}

Expected<std::string> saveCheckpoint(const std::string &directory,
                                     const TrainingState &state) {
  if (state.step < 0)
    return Error(fmt::format("checkpoint: negative step {}", state.step));
  if (Status created = io::createDirectories(directory); !created)
    return Error("checkpoint: " + created.error().message());
  for (const Tensor &t : state.parameters)
    if (t.name.rfind("optimizer.", 0) == 0 || t.name.rfind("__", 0) == 0)
      return Error("checkpoint: parameter name \"" + t.name +
                   "\" uses a reserved prefix");
  io::SafetensorsWriter writer;
  std::vector<std::pair<std::string, const Tensor *>> named;
  for (auto [list, prefix] : {std::pair{&state.parameters, ""},
                              std::pair{&state.optimizerM, kPrefixM},
                              std::pair{&state.optimizerV, kPrefixV}})
    for (const Tensor &t : *list) {
      std::string stored = prefix + t.name;
      Status added = writer.addTensor(stored, t.dtype, t.shape,
                                      t.bytes.data(), t.bytes.size());
      if (!added)
        return added.error().withContext("checkpoint");
      named.emplace_back(std::move(stored), &t);
    }

  writer.setMetadata("format", kFormatName);
  writer.setMetadata("format_version", std::to_string(kFormatVersion));
  writer.setMetadata("model", state.model);
  writer.setMetadata("policy", state.policy);
  writer.setMetadata("step", std::to_string(state.step));
  writer.setMetadata("seed", std::to_string(state.seed));
  writer.setMetadata("rng_state", state.rngState);
  writer.setMetadata("data_position", state.dataPosition);
  writer.setMetadata("run", state.run);
  writer.setMetadata("elapsed_s", fmt::format("{:.17g}", state.elapsedSeconds));
  writer.setMetadata("checksum", hex32(checksumNamed(std::move(named))));

  std::string name = checkpointFileName(state.step);
  std::string path = joinPath(directory, name);
  Status written = writer.write(path);
  if (!written)
    return written.error();
  Status latest =
      io::writeFileAtomically(joinPath(directory, "latest"), name + "\n");
  if (!latest)
    return latest.error();
  return path;
}

Expected<TrainingState> loadCheckpoint(const std::string &path,
                                       const CheckpointSpec *spec) {
  Expected<io::SafetensorsFile> file = io::SafetensorsFile::open(path);
  if (!file)
    return file.error();
  std::map<std::string, std::string> meta(file->metadata().begin(),
                                          file->metadata().end());
  auto get = [&](const char *key, std::string &out) -> Status {
    auto it = meta.find(key);
    if (it == meta.end())
      return Error(path + ": not a Tetra checkpoint: no \"" +
                   std::string(key) + "\" in __metadata__");
    out = it->second;
    return io::success();
  };
  std::string format, version, step, seed, checksum;
  TrainingState state;
  for (auto [key, out] : std::initializer_list<std::pair<const char *, std::string *>>{
           {"format", &format}, {"format_version", &version},
           {"model", &state.model}, {"policy", &state.policy},
           {"step", &step}, {"seed", &seed}, {"rng_state", &state.rngState},
           {"data_position", &state.dataPosition}, {"checksum", &checksum}})
    if (Status s = get(key, *out); !s)
      return s.error();
  if (format != kFormatName)
    return Error(path + ": not a Tetra checkpoint (format \"" + format + "\")");
  if (version != std::to_string(kFormatVersion))
    return Error(fmt::format(
        "{}: checkpoint format version {} is not supported (expected {})", path,
        version, kFormatVersion));
  if (!parseI64(step, state.step) || state.step < 0)
    return Error(path + ": bad step \"" + step + "\"");
  if (!parseU64(seed, state.seed))
    return Error(path + ": bad seed \"" + seed + "\"");
  if (auto run = meta.find("run"); run != meta.end())
    state.run = run->second;
  if (auto elapsed = meta.find("elapsed_s"); elapsed != meta.end()) {
    char *end = nullptr;
    state.elapsedSeconds = std::strtod(elapsed->second.c_str(), &end);
    if (elapsed->second.empty() || *end != '\0' ||
        !std::isfinite(state.elapsedSeconds) || state.elapsedSeconds < 0)
      return Error(path + ": bad elapsed_s \"" + elapsed->second + "\"");
  }

  std::vector<Tensor> stored;
  stored.reserve(file->tensors().size());
  for (const io::TensorInfo &info : file->tensors()) {
    const uint8_t *data = file->data(info);
    stored.push_back({info.name, info.dtype, info.shape,
                      std::vector<uint8_t>(data, data + info.numBytes())});
  }
  std::vector<const Tensor *> all;
  for (const Tensor &t : stored)
    all.push_back(&t);
  std::string actual = hex32(checksumTensors(all));
  if (actual != checksum)
    return Error(path + ": checksum mismatch (stored " + checksum +
                 ", computed " + actual + "): the checkpoint is corrupt");

  for (Tensor &t : stored) {
    if (t.name.rfind(kPrefixM, 0) == 0) {
      t.name.erase(0, sizeof(kPrefixM) - 1);
      state.optimizerM.push_back(std::move(t));
    } else if (t.name.rfind(kPrefixV, 0) == 0) {
      t.name.erase(0, sizeof(kPrefixV) - 1);
      state.optimizerV.push_back(std::move(t));
    } else {
      state.parameters.push_back(std::move(t));
    }
  }

  if (spec) {
    if (state.model != spec->model)
      return Error(path + ": checkpoint of model \"" + state.model +
                   "\", expected \"" + spec->model + "\"");
    for (const TensorSpec &want : spec->parameters) {
      const Tensor *got = TrainingState::find(state.parameters, want.name);
      if (!got)
        return Error(path + ": missing tensor \"" + want.name + "\"");
      if (got->shape != want.shape)
        return Error(path + ": tensor \"" + want.name + "\" has shape " +
                     io::shapeToString(got->shape) + ", the model expects " +
                     io::shapeToString(want.shape));
      if (got->dtype != want.dtype)
        return Error(path + ": tensor \"" + want.name + "\" is " +
                     std::string(io::dtypeName(got->dtype)) +
                     ", the model expects " +
                     std::string(io::dtypeName(want.dtype)));
      if (spec->requireOptimizer) {
        for (auto [list, prefix] :
             {std::pair{&state.optimizerM, kPrefixM},
              std::pair{&state.optimizerV, kPrefixV}}) {
          const Tensor *moment = TrainingState::find(*list, want.name);
          if (!moment)
            return Error(path + ": missing tensor \"" + prefix + want.name +
                         "\"");
          if (moment->shape != want.shape)
            return Error(path + ": tensor \"" + prefix + want.name +
                         "\" has shape " + io::shapeToString(moment->shape) +
                         ", the model expects " +
                         io::shapeToString(want.shape));
        }
      }
    }
    for (const Tensor &t : state.parameters) {
      bool known = false;
      for (const TensorSpec &want : spec->parameters)
        known = known || want.name == t.name;
      if (!known)
        return Error(path + ": tensor \"" + t.name +
                     "\" is not a parameter of model \"" + spec->model + "\"");
    }
  }
  return state;
}

Expected<std::string> latestCheckpoint(const std::string &directory) {
  std::string pointer = joinPath(directory, "latest");
  std::ifstream in(pointer, std::ios::binary);
  if (!in)
    return Error(pointer + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  std::string name = text.str();
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r'))
    name.pop_back();
  if (name.empty() || name.find('/') != std::string::npos ||
      name.find('\n') != std::string::npos)
    return Error(pointer + ": does not name a checkpoint file in " + directory);
  return joinPath(directory, name);
}

bool holdsCheckpoints(const std::string &directory) {
  std::error_code error;
  for (const auto &entry :
       std::filesystem::directory_iterator(directory, error)) {
    std::string name = entry.path().filename().string();
    if (name == "latest" || isCheckpointFileName(name))
      return true;
  }
  return false;
}

Status checkRoomFor(const std::string &directory, uint64_t bytes) {
  std::error_code error;
  std::filesystem::path at = std::filesystem::absolute(directory, error);
  while (!std::filesystem::exists(at, error) && at.has_parent_path() &&
         at != at.parent_path())
    at = at.parent_path();
  std::filesystem::space_info space = std::filesystem::space(at, error);
  if (error)
    return Error(fmt::format("{}: cannot read its file system's free space: {}",
                             at.string(), error.message()));
  if (space.available >= bytes)
    return io::success();
  auto gb = [](uint64_t n) { return fmt::format("{:.1f} GB", n / 1e9); };
  return Error(fmt::format(
      "a checkpoint of this run takes {} (the parameters and both AdamW "
      "moments in fp32) and the file system of '{}' has {} free: the run "
      "would fail at its first checkpoint; free space or choose another "
      "directory",
      gb(bytes), directory, gb(space.available)));
}

Status removeCheckpoints(const std::string &directory) {
  std::error_code error;
  std::vector<std::filesystem::path> doomed;
  for (const auto &entry :
       std::filesystem::directory_iterator(directory, error)) {
    std::string name = entry.path().filename().string();
    if (name == "latest" || isCheckpointFileName(name))
      doomed.push_back(entry.path());
  }
  if (error && error != std::errc::no_such_file_or_directory)
    return Error("cannot list '" + directory + "': " + error.message());
  // The pointer first: a directory never points at a removed file.
  std::sort(doomed.begin(), doomed.end(), [](const auto &a, const auto &b) {
    return (a.filename() == "latest") > (b.filename() == "latest");
  });
  for (const std::filesystem::path &path : doomed)
    if (!std::filesystem::remove(path, error))
      return Error("cannot remove '" + path.string() + "': " + error.message());
  return io::success();
}

Expected<TrainingState> loadLatestCheckpoint(const std::string &directory,
                                             const CheckpointSpec *spec) {
  Expected<std::string> path = latestCheckpoint(directory);
  if (!path)
    return path.error();
  return loadCheckpoint(*path, spec);
}

} // namespace tetra::checkpoint
