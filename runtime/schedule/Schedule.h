//===- Schedule.h - A training step as a flat list of launches --*- C++ -*-===//
//
// What the compiler hands the runtime: every buffer the step touches, with
// its role, shape and — for temporaries — its offset in one arena whose
// layout the memory plan chose from the buffers' lifetimes; and the step as a
// flat list of kernel launches (library kernels by their registered name,
// compiled kernels by their symbol), each with buffers and scalars in the
// kernel's signature order (runtime/backend/KernelABI.h). Running it needs no
// compiler: the runtime walks the list.
//
// A schedule is stored as JSON (`tetra emit --stage=schedule` prints it).
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_SCHEDULE_SCHEDULE_H
#define TETRA_RUNTIME_SCHEDULE_SCHEDULE_H

#include "runtime/backend/Backend.h"
#include "runtime/backend/KernelABI.h"
#include "runtime/io/Error.h"
#include "runtime/numerics/BlockQuantize.h"
#include "runtime/schedule/Recompute.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tetra::schedule {

/// What a buffer is to the step. Bound buffers (all but Temporary) are
/// allocated and owned by the caller and live across steps; temporaries live
/// in the arena, between their first and last launch.
enum class BufferRole {
  Parameter, ///< fp32 master weight, updated in place by AdamW
  AdamM,     ///< first moment
  AdamV,     ///< second moment
  Input,     ///< tokens, targets
  Output,    ///< loss, grad norm: read back after the step
  Gradient, ///< "grad.<param>": the gradient summed over a step's micro-batches
  Temporary, ///< activations, gradients, codes, scales
  Constant,  ///< a splat the executor fills once (the loss seed dloss = 1)
};

std::string_view bufferRoleName(BufferRole role);

struct BufferDesc {
  std::string name;
  BufferRole role = BufferRole::Temporary;
  backend::ElementType type = backend::ElementType::F32;
  std::vector<int64_t> shape;
  /// Temporaries: the byte offset in the arena (planMemory sets it).
  int64_t offset = -1;
  /// Constants: every element's value.
  double splat = 0;

  int64_t numElements() const;
  int64_t bytes() const;
};

/// One operand of a GEMM that a compiled kernel rotates and quantizes: what
/// the runtime needs to measure the quantization error of the operand the
/// kernel reads (numerics::quantizationError), without the compiler.
struct QuantizedOperand {
  /// "x", "w" or "dy": the activation, the weight or the output gradient.
  std::string name;
  int argument = 0; ///< Position in Launch::buffers of the f32 operand.
  /// The f32 operand's schedule buffer, where the launch does not pass it
  /// itself (a GPU GEMM launch reads its prologue's codes): -1 when
  /// `argument` names it.
  int buffer = -1;
  /// The operand as the kernel sees it (a view may reshape the buffer), and
  /// the reduction axis it is quantized along.
  std::vector<int64_t> shape;
  int axis = 0;
  numerics::OperandQuantization quantization;
  /// Stochastic rounding's stream: the run's seed and step with this id.
  uint32_t tensorId = 0;
};

/// What a launch of one GEMM of a linear layer computes.
struct GemmLaunch {
  std::string linear; ///< "layers.0.attn.wq"
  std::string role;   ///< "fprop", "dgrad" or "wgrad"
  std::vector<QuantizedOperand> operands;
};

struct Launch {
  /// A library kernel's registered name ("rmsnorm.forward") or a compiled
  /// kernel's symbol.
  std::string kernel;
  std::vector<int> buffers; ///< Indices into Schedule::buffers.
  std::vector<backend::Scalar> scalars;
  /// Where it came from, for errors and NaN reports: "layers.0.attn.wq
  /// wgrad", "rmsnorm at llama_tiny.tetra:41:7".
  std::string origin;
  /// Scalars set per run (the step, the learning rate): position in
  /// `scalars` and the name StepExecutor::setScalar gives them.
  std::vector<std::pair<int, std::string>> boundScalars;
  /// Set for a compiled kernel that computes one GEMM of a linear layer.
  std::optional<GemmLaunch> gemm;
  /// Arguments (output, input) whose memory this launch may share: its
  /// kernel reads each element of the input before writing the output's
  /// same bytes, so where the input dies at this launch, planMemory
  /// places the output on it ("in_place" in the JSON). Consecutive launches
  /// may declare one pair together: from the output's first launch to the
  /// input's last, each declares it, and together they read every element
  /// of the input before any of them writes over its bytes (the GPU's
  /// cross-entropy gradient as BF16 codes over its logits, in row ranges).
  std::vector<std::pair<int, int>> inPlace;
  /// A GPU launch's grid, block and dynamic shared memory (the compiler's
  /// choice for its kernel; "grid", "block", "shared_bytes" in the JSON);
  /// the CPU ignores it.
  backend::LaunchConfig config;
};

/// Where the parts of a training step end, as launch counts. Running
/// launches [0, forwardEnd) computes the loss; [0, gradientsEnd) the loss
/// and every parameter's gradient (added into the Gradient buffers when the
/// step accumulates micro-batches); [gradientsEnd, updateBegin) the global
/// gradient norm; [updateBegin, end) clipping and the optimizer update. The
/// arena keeps its bytes between runs, so running the parts one after the
/// other is running the whole step. -1: the end of the launch list (a
/// schedule without an optimizer).
struct Phases {
  int forwardEnd = -1;
  int gradientsEnd = -1;
  int updateBegin = -1;
};

struct Schedule {
  std::string name;
  std::vector<BufferDesc> buffers;
  std::vector<Launch> launches;
  Phases phases;
  /// Bytes of the arena that holds every temporary (planMemory sets it).
  int64_t arenaBytes = 0;

  /// The launch counts of `phases`, -1 resolved to launches.size().
  int forwardEnd() const;
  int gradientsEnd() const;
  int updateBegin() const;
  /// Whether the step sums gradients over micro-batches: it has Gradient
  /// buffers, and its gradient part reads the run-time scalars
  /// "micro_batch" (0 first: overwrite) and "grad_scale" (1 / micro-batches).
  bool accumulatesGradients() const;

  /// The index of the buffer named `name`, or -1.
  int findBuffer(std::string_view name) const;
  /// Bytes of all bound buffers (parameters, moments, inputs, outputs).
  int64_t boundBytes() const;
  /// Bytes the temporaries would take without reuse: the plan's baseline.
  int64_t unplannedBytes() const;
  /// For each buffer, whether a launch names it. One that none names holds
  /// nothing the step wrote (a GPU step's fp32 tensor whose writer writes
  /// only its BF16 codes).
  std::vector<bool> namedBuffers() const;
};

/// Assigns every temporary an arena offset (aligned to `alignment`) so that
/// two temporaries share bytes only if their lifetimes — from the first
/// launch that uses them to the last — do not overlap; sets arenaBytes.
/// Greedy best fit, largest buffers first: deterministic.
void planMemory(Schedule &schedule, int64_t alignment = 64);

/// Where a planned schedule's arena is fullest: the first launch at which
/// the live temporaries (first to last use) cover the most arena bytes
/// (buffers sharing bytes, an in-place pair, counted once), and those
/// temporaries, largest first (`tetra emit --stage=schedule` prints it).
struct MemoryPeak {
  int launch = -1;
  int64_t bytes = 0;
  std::vector<int> live;
};
MemoryPeak memoryPeak(const Schedule &schedule);

/// Recomputes activations in the backward instead of keeping them from the
/// forward (`mode`, a run's `recompute`):
///   - Cheap: an output of 1 MiB or more of an RMSNorm or of a compiled
///     elementwise kernel (no run-time scalars) in the loss phase;
///   - Layers: those, and every output of a launch before the forward's
///     last RMSNorm (GEMMs, RoPE, attention: any launch that writes fresh
///     temporaries and takes no run-time scalars) but the RMSNorms' inputs,
///     the residual stream, which stay as checkpoints;
/// read in the gradients phase and whose launch's inputs the gradients
/// phase keeps anyway (or recomputes too). Each is written again by a copy
/// of its launch right before its first read there (a fresh temporary,
/// "NAME.again"; the backward reads that), its own recomputed inputs first.
/// The forward's output then dies with the forward, so the memory plan's
/// peak (the backward's start) drops; the kernels are deterministic, so
/// every value is the same. Returns the launches added (the gradients and
/// update phases move by as many). Run before planMemory.
int rematerialize(Schedule &schedule, Recompute mode);

/// Checks a schedule: buffer indices in range, shapes non-negative,
/// temporaries planned inside the arena without live overlaps, and — when a
/// signature is known for a launch's kernel — argument counts and kinds.
/// `signatureOf` returns null for kernels it does not know (compiled ones).
io::Status validate(
    const Schedule &schedule,
    const backend::KernelSignature *(*signatureOf)(std::string_view) = nullptr);

/// The JSON form, and back. Reading checks every field and reports the first
/// problem with its place ("launches[12].buffers[3]: ...").
std::string toJson(const Schedule &schedule);
io::Expected<Schedule> fromJson(std::string_view text);

} // namespace tetra::schedule

#endif // TETRA_RUNTIME_SCHEDULE_SCHEDULE_H
