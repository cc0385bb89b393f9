//===- Checkpoint.h - Training state in safetensors --------------*- C++ -*-===//
//
// A checkpoint is one safetensors file (io/Safetensors.h), loadable by
// PyTorch / Hugging Face tools:
//
//   <name>                 each parameter under its model name
//   optimizer.m.<name>     first moment of the parameter, if any
//   optimizer.v.<name>     second moment, if any
//   __metadata__:
//     format          "tetra-checkpoint"
//     format_version  "1"
//     model, policy   names
//     step            decimal
//     seed            decimal (u64)
//     rng_state       opaque string (the trainer's)
//     data_position   data::DataPosition::serialize(), or "" (opaque here)
//     run             the run's name (optional: "" when absent)
//     elapsed_s       seconds trained up to this step, across resumes
//                     (optional: 0 when absent)
//     checksum        CRC-32 (zlib) as 8 hex digits, over every tensor in
//                     name order: its name, a NUL, its dtype name, a NUL,
//                     its shape as text, a NUL, its bytes
//
// saveCheckpoint writes DIR/step_%08lld.safetensors atomically (temporary
// file, fsync, rename), then DIR/latest (one line: the file name) atomically.
// A failed save leaves every previous file as it was.
//
// loadCheckpoint validates the file (safetensors structure, format, version,
// checksum) and, given a CheckpointSpec, that the model name matches and
// every expected tensor is present with its dtype and shape (and no
// unexpected ones). Nothing is written while loading.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_CHECKPOINT_CHECKPOINT_H
#define TETRA_RUNTIME_CHECKPOINT_CHECKPOINT_H

#include "runtime/io/Error.h"
#include "runtime/io/Safetensors.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tetra::checkpoint {

constexpr const char *kFormatName = "tetra-checkpoint";
constexpr int kFormatVersion = 1;

struct Tensor {
  std::string name;
  io::Dtype dtype = io::Dtype::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes; ///< little-endian raw data

  bool operator==(const Tensor &o) const {
    return name == o.name && dtype == o.dtype && shape == o.shape &&
           bytes == o.bytes;
  }
};

/// Everything a trainer needs to resume.
struct TrainingState {
  std::string model;
  std::string policy;
  int64_t step = 0;
  uint64_t seed = 0;
  std::string rngState;
  std::string dataPosition;
  std::string run;            ///< The run's name ("tiny_c4_cpu/bf16").
  double elapsedSeconds = 0; ///< Training time up to `step`, across resumes.
  std::vector<Tensor> parameters;   ///< names as in the model
  std::vector<Tensor> optimizerM;   ///< named like the parameter (no prefix)
  std::vector<Tensor> optimizerV;

  /// The tensor of `list` named `name`, or null.
  static const Tensor *find(const std::vector<Tensor> &list,
                            const std::string &name);
};

/// What the model being resumed expects.
struct TensorSpec {
  std::string name;
  io::Dtype dtype = io::Dtype::F32;
  std::vector<int64_t> shape;
};
struct CheckpointSpec {
  std::string model;
  std::vector<TensorSpec> parameters;
  /// Whether optimizer.m.* / optimizer.v.* must exist for every parameter
  /// (with the parameter's shape; their dtype is not checked).
  bool requireOptimizer = true;
};

/// CRC-32 over the tensors as described above (order-independent of the
/// input order: sorted by name).
uint32_t checksumTensors(const std::vector<const Tensor *> &tensors);

/// "step_00000100.safetensors".
std::string checkpointFileName(int64_t step);

/// Writes `state` into `directory` (created with its parents if missing) and
/// points DIR/latest at it. Returns the file's path.
io::Expected<std::string> saveCheckpoint(const std::string &directory,
                                         const TrainingState &state);

/// Reads and verifies a checkpoint file; with `spec`, also checks it fits.
io::Expected<TrainingState> loadCheckpoint(const std::string &path,
                                           const CheckpointSpec *spec = nullptr);

/// The path DIR/latest points at.
io::Expected<std::string> latestCheckpoint(const std::string &directory);

/// Whether `directory` holds checkpoints: a `latest` pointer or any
/// step_*.safetensors file.
bool holdsCheckpoints(const std::string &directory);

/// An error, before a run that would fail at its first checkpoint, when a
/// checkpoint of `bytes` does not fit in the free space of `directory`'s
/// file system (statvfs of it, or of its nearest existing parent: it need
/// not exist yet), naming both sizes.
io::Status checkRoomFor(const std::string &directory, uint64_t bytes);

/// Removes the checkpoints of `directory` (its step_*.safetensors files and
/// `latest`), leaving every other file.
io::Status removeCheckpoints(const std::string &directory);

/// loadCheckpoint(latestCheckpoint(directory)).
io::Expected<TrainingState>
loadLatestCheckpoint(const std::string &directory,
                     const CheckpointSpec *spec = nullptr);

} // namespace tetra::checkpoint

#endif // TETRA_RUNTIME_CHECKPOINT_CHECKPOINT_H
