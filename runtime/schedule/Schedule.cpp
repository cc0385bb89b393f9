//===- Schedule.cpp - A training step as a flat list of launches ----------===//

#include "runtime/schedule/Schedule.h"

#include "runtime/io/Json.h"

#include <algorithm>
#include <fmt/format.h>
#include <numeric>

using namespace tetra;
using namespace tetra::schedule;

namespace {

constexpr BufferRole kRoles[] = {BufferRole::Parameter, BufferRole::AdamM,
                                 BufferRole::AdamV,     BufferRole::Input,
                                 BufferRole::Output,    BufferRole::Gradient,
                                 BufferRole::Temporary, BufferRole::Constant};

/// [first, last] launch index of every buffer; {-1, -1} when unused.
std::vector<std::pair<int, int>> lifetimes(const Schedule &schedule) {
  std::vector<std::pair<int, int>> life(schedule.buffers.size(), {-1, -1});
  for (int i = 0; i < static_cast<int>(schedule.launches.size()); ++i) {
    for (int buffer : schedule.launches[i].buffers) {
      if (buffer < 0 || buffer >= static_cast<int>(life.size()))
        continue;
      auto &[first, last] = life[buffer];
      if (first < 0)
        first = i;
      last = i;
    }
  }
  return life;
}

/// Whether launch `at` declares (output, input) in place.
bool declaresInPlace(const Launch &launch, int input, int output) {
  for (auto [out, in] : launch.inPlace)
    if (out < static_cast<int>(launch.buffers.size()) &&
        in < static_cast<int>(launch.buffers.size()) &&
        launch.buffers[out] == output && launch.buffers[in] == input)
      return true;
  return false;
}

/// Whether `output` first appears at or before the launch where `input` is
/// last used, and every launch from the one to the other declares the pair
/// in place: one launch (its kernel reads each element before writing over
/// it), or a run of them that together do.
bool inPlaceAt(const Schedule &schedule,
               const std::vector<std::pair<int, int>> &life, int input,
               int output) {
  const int first = life[output].first, last = life[input].second;
  if (first < 0 || last < first || life[input].first > first)
    return false;
  for (int at = first; at <= last; ++at)
    if (!declaresInPlace(schedule.launches[at], input, output))
      return false;
  return true;
}

int64_t alignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

} // namespace

std::string_view tetra::schedule::bufferRoleName(BufferRole role) {
  switch (role) {
  case BufferRole::Parameter:
    return "parameter";
  case BufferRole::AdamM:
    return "adam_m";
  case BufferRole::AdamV:
    return "adam_v";
  case BufferRole::Input:
    return "input";
  case BufferRole::Output:
    return "output";
  case BufferRole::Gradient:
    return "gradient";
  case BufferRole::Temporary:
    return "temporary";
  case BufferRole::Constant:
    return "constant";
  }
  return "";
}

namespace {
int resolvePhase(int end, const Schedule &schedule) {
  return end < 0 ? static_cast<int>(schedule.launches.size()) : end;
}
} // namespace

int Schedule::forwardEnd() const {
  return resolvePhase(phases.forwardEnd, *this);
}
int Schedule::gradientsEnd() const {
  return resolvePhase(phases.gradientsEnd, *this);
}
int Schedule::updateBegin() const {
  return resolvePhase(phases.updateBegin, *this);
}

bool Schedule::accumulatesGradients() const {
  return std::any_of(buffers.begin(), buffers.end(), [](const BufferDesc &b) {
    return b.role == BufferRole::Gradient;
  });
}

int64_t BufferDesc::numElements() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

int64_t BufferDesc::bytes() const {
  return numElements() * static_cast<int64_t>(backend::elementSize(type));
}

int Schedule::findBuffer(std::string_view bufferName) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == bufferName)
      return static_cast<int>(i);
  return -1;
}

int64_t Schedule::boundBytes() const {
  int64_t total = 0;
  for (const BufferDesc &buffer : buffers)
    if (buffer.role != BufferRole::Temporary &&
        buffer.role != BufferRole::Constant)
      total += buffer.bytes();
  return total;
}

int64_t Schedule::unplannedBytes() const {
  int64_t total = 0;
  for (const BufferDesc &buffer : buffers)
    if (buffer.role == BufferRole::Temporary)
      total += buffer.bytes();
  return total;
}

std::vector<bool> Schedule::namedBuffers() const {
  std::vector<bool> named(buffers.size(), false);
  for (const Launch &launch : launches)
    for (int buffer : launch.buffers)
      if (buffer >= 0 && buffer < static_cast<int>(named.size()))
        named[buffer] = true;
  return named;
}

tetra::schedule::MemoryPeak
tetra::schedule::memoryPeak(const Schedule &schedule) {
  std::vector<std::pair<int, int>> life = lifetimes(schedule);
  auto liveAt = [&](int l) {
    std::vector<int> live;
    for (size_t b = 0; b < schedule.buffers.size(); ++b)
      if (schedule.buffers[b].role == BufferRole::Temporary &&
          schedule.buffers[b].offset >= 0 && life[b].first >= 0 &&
          life[b].first <= l && l <= life[b].second)
        live.push_back(static_cast<int>(b));
    return live;
  };
  // The union of the live buffers' byte ranges.
  auto covered = [&](const std::vector<int> &live) {
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (int b : live)
      ranges.push_back({schedule.buffers[b].offset,
                        schedule.buffers[b].offset +
                            schedule.buffers[b].bytes()});
    std::sort(ranges.begin(), ranges.end());
    int64_t total = 0, end = 0;
    for (auto [begin, stop] : ranges) {
      begin = std::max(begin, end);
      if (stop > begin)
        total += stop - begin;
      end = std::max(end, stop);
    }
    return total;
  };
  MemoryPeak peak;
  for (int l = 0; l < static_cast<int>(schedule.launches.size()); ++l) {
    std::vector<int> live = liveAt(l);
    if (int64_t bytes = covered(live); bytes > peak.bytes) {
      peak.launch = l;
      peak.bytes = bytes;
      peak.live = std::move(live);
    }
  }
  std::stable_sort(peak.live.begin(), peak.live.end(), [&](int a, int b) {
    return schedule.buffers[a].bytes() > schedule.buffers[b].bytes();
  });
  return peak;
}

void tetra::schedule::planMemory(Schedule &schedule, int64_t alignment) {
  std::vector<std::pair<int, int>> life = lifetimes(schedule);
  const int count = static_cast<int>(schedule.buffers.size());
  auto temporary = [&](int i) {
    return i >= 0 && i < count &&
           schedule.buffers[i].role == BufferRole::Temporary;
  };
  // In-place outputs join their input's group: one placement, the group's
  // lifetime and its largest size.
  std::vector<int> group(count);
  for (int i = 0; i < count; ++i)
    group[i] = i;
  for (int l = 0; l < static_cast<int>(schedule.launches.size()); ++l) {
    const Launch &launch = schedule.launches[l];
    for (auto [output, input] : launch.inPlace) {
      if (output < 0 || input < 0 ||
          output >= static_cast<int>(launch.buffers.size()) ||
          input >= static_cast<int>(launch.buffers.size()))
        continue;
      int out = launch.buffers[output], in = launch.buffers[input];
      if (out != in && temporary(out) && temporary(in) &&
          life[out].first == l && group[out] == out &&
          inPlaceAt(schedule, life, in, out))
        group[out] = group[in];
    }
  }
  std::vector<int64_t> groupBytes(count, 0);
  std::vector<std::pair<int, int>> groupLife(count, {-1, -1});
  for (int i = 0; i < count; ++i) {
    if (!temporary(i))
      continue;
    int g = group[i];
    groupBytes[g] = std::max(groupBytes[g], schedule.buffers[i].bytes());
    auto &[first, last] = groupLife[g];
    if (life[i].first >= 0) {
      first = first < 0 ? life[i].first : std::min(first, life[i].first);
      last = std::max(last, life[i].second);
    }
  }

  std::vector<int> order;
  for (int i = 0; i < count; ++i)
    if (temporary(i) && group[i] == i)
      order.push_back(i);
  // Largest first, then by first use, then by index: a deterministic order.
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (groupBytes[a] != groupBytes[b])
      return groupBytes[a] > groupBytes[b];
    if (groupLife[a].first != groupLife[b].first)
      return groupLife[a].first < groupLife[b].first;
    return a < b;
  });

  struct Placed {
    int64_t begin, end;
    int first, last;
  };
  std::vector<Placed> placed;
  std::vector<int64_t> offset(count, -1);
  int64_t arena = 0;
  for (int index : order) {
    int64_t size = alignUp(std::max<int64_t>(groupBytes[index], 1), alignment);
    auto [first, last] = groupLife[index];
    // The gaps between placed buffers whose lifetimes overlap this one's.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Placed &other : placed)
      if (first >= 0 && other.first >= 0 && other.first <= last &&
          first <= other.last)
        busy.push_back({other.begin, other.end});
    std::sort(busy.begin(), busy.end());
    int64_t best = -1, bestGap = INT64_MAX, cursor = 0;
    for (auto [begin, end] : busy) {
      if (begin - cursor >= size && begin - cursor < bestGap) {
        best = cursor;
        bestGap = begin - cursor;
      }
      cursor = std::max(cursor, end);
    }
    if (best < 0)
      best = cursor;
    offset[index] = best;
    placed.push_back({best, best + size, first, last});
    arena = std::max(arena, best + size);
  }
  for (int i = 0; i < count; ++i)
    if (temporary(i))
      schedule.buffers[i].offset = offset[group[i]];
  schedule.arenaBytes = arena;
}

io::Status tetra::schedule::validate(
    const Schedule &schedule,
    const backend::KernelSignature *(*signatureOf)(std::string_view)) {
  int count = static_cast<int>(schedule.buffers.size());
  for (int i = 0; i < count; ++i) {
    const BufferDesc &buffer = schedule.buffers[i];
    std::string where = fmt::format("buffers[{}] '{}': ", i, buffer.name);
    for (int64_t size : buffer.shape)
      if (size < 0)
        return io::Error(where + "negative size in its shape");
    if (buffer.role == BufferRole::Temporary &&
        (buffer.offset < 0 ||
         buffer.offset + buffer.bytes() > schedule.arenaBytes))
      return io::Error(fmt::format(
          "{}temporary outside the arena (offset {}, {} bytes, arena {})",
          where, buffer.offset, buffer.bytes(), schedule.arenaBytes));
  }
  int launchCount = static_cast<int>(schedule.launches.size());
  const Phases &phases = schedule.phases;
  for (int end : {phases.forwardEnd, phases.gradientsEnd, phases.updateBegin})
    if (end < -1 || end > launchCount)
      return io::Error(
          fmt::format("phases: launch count {} out of range", end));
  if (!(schedule.forwardEnd() <= schedule.gradientsEnd() &&
        schedule.gradientsEnd() <= schedule.updateBegin()))
    return io::Error("phases: forward_end <= gradients_end <= update_begin "
                     "does not hold");
  for (size_t l = 0; l < schedule.launches.size(); ++l) {
    const Launch &launch = schedule.launches[l];
    std::string where = fmt::format("launches[{}] ({}): ", l, launch.kernel);
    if (launch.gemm)
      for (const QuantizedOperand &operand : launch.gemm->operands) {
        int64_t elements = 1;
        for (int64_t size : operand.shape)
          elements *= size;
        const bool passed = operand.buffer < 0;
        if ((passed && (operand.argument < 0 ||
                        operand.argument >=
                            static_cast<int>(launch.buffers.size()))) ||
            (!passed && operand.buffer >= count) || operand.axis < 0 ||
            operand.axis >= static_cast<int>(operand.shape.size()))
          return io::Error(where + "gemm operand '" + operand.name +
                           "': argument or axis out of range");
        int buffer =
            passed ? launch.buffers[operand.argument] : operand.buffer;
        if (buffer >= 0 && buffer < count &&
            schedule.buffers[buffer].numElements() != elements)
          return io::Error(where + "gemm operand '" + operand.name +
                           "': shape does not match its buffer");
      }
    for (int buffer : launch.buffers)
      if (buffer < 0 || buffer >= count)
        return io::Error(
            fmt::format("{}buffer index {} out of range", where, buffer));
    for (const auto &[position, scalarName] : launch.boundScalars)
      if (position < 0 || position >= static_cast<int>(launch.scalars.size()))
        return io::Error(
            fmt::format("{}bound scalar '{}' at position {} out of range",
                        where, scalarName, position));
    const backend::KernelSignature *signature =
        signatureOf ? signatureOf(launch.kernel) : nullptr;
    if (!signature)
      continue;
    bool countsMatch =
        signature->variadic
            ? launch.buffers.size() >= signature->buffers.size()
            : launch.buffers.size() == signature->buffers.size() &&
                  launch.scalars.size() == signature->scalars.size();
    if (!countsMatch)
      return io::Error(where + "arguments do not match " +
                       backend::describe(*signature));
  }
  // Temporaries that share bytes must not be live at the same time.
  std::vector<std::pair<int, int>> life = lifetimes(schedule);
  for (int a = 0; a < count; ++a) {
    const BufferDesc &x = schedule.buffers[a];
    if (x.role != BufferRole::Temporary || life[a].first < 0)
      continue;
    for (int b = a + 1; b < count; ++b) {
      const BufferDesc &y = schedule.buffers[b];
      if (y.role != BufferRole::Temporary || life[b].first < 0)
        continue;
      bool bytesOverlap =
          x.offset < y.offset + y.bytes() && y.offset < x.offset + x.bytes();
      bool livesOverlap =
          life[a].first <= life[b].second && life[b].first <= life[a].second;
      if (livesOverlap && x.offset == y.offset &&
          (inPlaceAt(schedule, life, a, b) || inPlaceAt(schedule, life, b, a)))
        continue; // an in-place output on its dying input
      if (bytesOverlap && livesOverlap && x.bytes() && y.bytes())
        return io::Error("temporaries '" + x.name + "' and '" + y.name +
                         "' share arena bytes while both are live");
    }
  }
  return io::success();
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

namespace {

using numerics::RotationKind;
using numerics::ScaleFormat;
using numerics::SignSchedule;

constexpr std::pair<ScaleFormat, std::string_view> kScaleFormats[] = {
    {ScaleFormat::E8M0, "e8m0"}, {ScaleFormat::E4M3, "e4m3"}};
constexpr std::pair<RotationKind, std::string_view> kRotationKinds[] = {
    {RotationKind::None, "none"},
    {RotationKind::Hadamard, "hadamard"},
    {RotationKind::RandomHadamard, "random_hadamard"}};
constexpr std::pair<SignSchedule, std::string_view> kSignSchedules[] = {
    {SignSchedule::Fixed, "fixed"}, {SignSchedule::PerStep, "per_step"}};

template <typename Enum, size_t N>
std::string_view nameIn(const std::pair<Enum, std::string_view> (&table)[N],
                        Enum value) {
  for (const auto &[candidate, name] : table)
    if (candidate == value)
      return name;
  return "?";
}

template <typename Enum, size_t N>
std::optional<Enum> parseIn(const std::pair<Enum, std::string_view> (&table)[N],
                            std::string_view name) {
  for (const auto &[candidate, candidateName] : table)
    if (candidateName == name)
      return candidate;
  return std::nullopt;
}

io::JsonValue gemmToJson(const GemmLaunch &gemm) {
  using io::JsonValue;
  JsonValue root = JsonValue::object();
  root.set("linear", JsonValue::string(gemm.linear));
  root.set("role", JsonValue::string(gemm.role));
  JsonValue operands = JsonValue::array();
  for (const QuantizedOperand &operand : gemm.operands) {
    const numerics::OperandQuantization &q = operand.quantization;
    JsonValue entry = JsonValue::object();
    entry.set("name", JsonValue::string(operand.name));
    entry.set("argument", JsonValue::integer(operand.argument));
    if (operand.buffer >= 0)
      entry.set("buffer", JsonValue::integer(operand.buffer));
    JsonValue shape = JsonValue::array();
    for (int64_t size : operand.shape)
      shape.push(JsonValue::integer(size));
    entry.set("shape", std::move(shape));
    entry.set("axis", JsonValue::integer(operand.axis));
    entry.set("element",
              JsonValue::string(std::string(formatName(q.format.element))));
    entry.set("block", JsonValue::integer(q.format.scaling.blockSize));
    entry.set("scale", JsonValue::string(std::string(nameIn(
                           kScaleFormats, q.format.scaling.scaleFormat))));
    entry.set("rule", JsonValue::string(std::string(
                          numerics::scaleRuleName(q.format.scaling.rule))));
    entry.set("rounding", JsonValue::string(std::string(
                              numerics::roundingName(q.format.rounding))));
    entry.set("rotation", JsonValue::string(std::string(
                              nameIn(kRotationKinds, q.rotation.kind))));
    entry.set("rotation_block", JsonValue::integer(q.rotation.blockSize));
    entry.set("signs", JsonValue::string(std::string(
                           nameIn(kSignSchedules, q.rotation.schedule))));
    entry.set("rotation_seed",
              JsonValue::integer(static_cast<int64_t>(q.rotation.seed)));
    entry.set("tensor_id", JsonValue::integer(operand.tensorId));
    operands.push(std::move(entry));
  }
  root.set("operands", std::move(operands));
  return root;
}

} // namespace

std::string tetra::schedule::toJson(const Schedule &schedule) {
  using io::JsonValue;
  JsonValue root = JsonValue::object();
  root.set("name", JsonValue::string(schedule.name));
  root.set("arena_bytes", JsonValue::integer(schedule.arenaBytes));
  JsonValue phases = JsonValue::object();
  phases.set("forward_end", JsonValue::integer(schedule.phases.forwardEnd));
  phases.set("gradients_end", JsonValue::integer(schedule.phases.gradientsEnd));
  phases.set("update_begin", JsonValue::integer(schedule.phases.updateBegin));
  root.set("phases", std::move(phases));
  JsonValue buffers = JsonValue::array();
  for (const BufferDesc &buffer : schedule.buffers) {
    JsonValue entry = JsonValue::object();
    entry.set("name", JsonValue::string(buffer.name));
    entry.set("role",
              JsonValue::string(std::string(bufferRoleName(buffer.role))));
    entry.set("type", JsonValue::string(backend::elementTypeName(buffer.type)));
    JsonValue shape = JsonValue::array();
    for (int64_t size : buffer.shape)
      shape.push(JsonValue::integer(size));
    entry.set("shape", std::move(shape));
    if (buffer.role == BufferRole::Temporary)
      entry.set("offset", JsonValue::integer(buffer.offset));
    if (buffer.role == BufferRole::Constant)
      entry.set("splat", JsonValue::number(buffer.splat));
    buffers.push(std::move(entry));
  }
  root.set("buffers", std::move(buffers));
  JsonValue launches = JsonValue::array();
  for (const Launch &launch : schedule.launches) {
    JsonValue entry = JsonValue::object();
    entry.set("kernel", JsonValue::string(launch.kernel));
    JsonValue args = JsonValue::array();
    for (int buffer : launch.buffers)
      args.push(JsonValue::integer(buffer));
    entry.set("buffers", std::move(args));
    JsonValue scalars = JsonValue::array();
    for (const backend::Scalar &scalar : launch.scalars) {
      JsonValue pair = JsonValue::array();
      bool isInt = scalar.kind() == backend::ScalarKind::Int;
      pair.push(JsonValue::string(isInt ? "i" : "f"));
      pair.push(isInt ? JsonValue::integer(scalar.asInt())
                      : JsonValue::number(scalar.asFloat()));
      scalars.push(std::move(pair));
    }
    entry.set("scalars", std::move(scalars));
    if (!launch.boundScalars.empty()) {
      JsonValue bound = JsonValue::object();
      for (const auto &[position, scalarName] : launch.boundScalars)
        bound.set(scalarName, JsonValue::integer(position));
      entry.set("bound_scalars", std::move(bound));
    }
    entry.set("origin", JsonValue::string(launch.origin));
    if (launch.gemm)
      entry.set("gemm", gemmToJson(*launch.gemm));
    if (launch.config.block[0] * launch.config.block[1] *
            launch.config.block[2] >
        1) {
      JsonValue grid = JsonValue::array(), block = JsonValue::array();
      for (int d = 0; d < 3; ++d) {
        grid.push(JsonValue::integer(launch.config.grid[d]));
        block.push(JsonValue::integer(launch.config.block[d]));
      }
      entry.set("grid", std::move(grid));
      entry.set("block", std::move(block));
    }
    if (!launch.inPlace.empty()) {
      JsonValue pairs = JsonValue::array();
      for (auto [output, input] : launch.inPlace) {
        JsonValue pair = JsonValue::array();
        pair.push(JsonValue::integer(output));
        pair.push(JsonValue::integer(input));
        pairs.push(std::move(pair));
      }
      entry.set("in_place", std::move(pairs));
    }
    if (launch.config.sharedMemoryBytes > 0)
      entry.set("shared_bytes",
                JsonValue::integer(launch.config.sharedMemoryBytes));
    launches.push(std::move(entry));
  }
  root.set("launches", std::move(launches));
  return io::writeJson(root);
}

namespace {

/// Reads fields of one JSON object, remembering the first error with its
/// path.
class Reader {
public:
  explicit Reader(std::string path) : path(std::move(path)) {}

  const io::JsonValue *field(const io::JsonValue &object, const char *key,
                             io::JsonValue::Kind kind) {
    const io::JsonValue *value = object.find(key);
    if (!value)
      return fail(std::string("missing '") + key + "'");
    if (value->kind() != kind)
      return fail(std::string("'") + key + "' must be " +
                  std::string(io::JsonValue::kindName(kind)));
    return value;
  }
  bool integer(const io::JsonValue &value, int64_t &out,
               const std::string &what) {
    if (!value.isInteger()) {
      fail(what + " must be an integer");
      return false;
    }
    out = value.asInt64();
    return true;
  }
  const io::JsonValue *fail(const std::string &message) {
    if (error.empty())
      error = path + ": " + message;
    return nullptr;
  }

  std::string path;
  std::string error;
};

/// A launch's "gemm" object; the first problem goes to `reader`.
std::optional<GemmLaunch> gemmFromJson(const io::JsonValue &item,
                                       Reader &reader) {
  using Kind = io::JsonValue::Kind;
  GemmLaunch gemm;
  const io::JsonValue *linear = reader.field(item, "linear", Kind::String);
  const io::JsonValue *role = reader.field(item, "role", Kind::String);
  const io::JsonValue *operands = reader.field(item, "operands", Kind::Array);
  if (!reader.error.empty())
    return std::nullopt;
  gemm.linear = linear->asString();
  gemm.role = role->asString();
  for (const io::JsonValue &entry : operands->items()) {
    if (!entry.isObject()) {
      reader.fail("a gemm operand must be an object");
      return std::nullopt;
    }
    QuantizedOperand operand;
    numerics::OperandQuantization &q = operand.quantization;
    const io::JsonValue *name = reader.field(entry, "name", Kind::String);
    const io::JsonValue *argument =
        reader.field(entry, "argument", Kind::Number);
    const io::JsonValue *shape = reader.field(entry, "shape", Kind::Array);
    const io::JsonValue *axis = reader.field(entry, "axis", Kind::Number);
    const io::JsonValue *element = reader.field(entry, "element", Kind::String);
    const io::JsonValue *block = reader.field(entry, "block", Kind::Number);
    const io::JsonValue *scale = reader.field(entry, "scale", Kind::String);
    const io::JsonValue *rule = reader.field(entry, "rule", Kind::String);
    const io::JsonValue *rounding =
        reader.field(entry, "rounding", Kind::String);
    const io::JsonValue *rotation =
        reader.field(entry, "rotation", Kind::String);
    const io::JsonValue *rotationBlock =
        reader.field(entry, "rotation_block", Kind::Number);
    const io::JsonValue *signs = reader.field(entry, "signs", Kind::String);
    const io::JsonValue *rotationSeed =
        reader.field(entry, "rotation_seed", Kind::Number);
    const io::JsonValue *tensorId =
        reader.field(entry, "tensor_id", Kind::Number);
    if (!reader.error.empty())
      return std::nullopt;
    operand.name = name->asString();
    int64_t value = 0;
    if (!reader.integer(*argument, value, "'argument'"))
      return std::nullopt;
    operand.argument = static_cast<int>(value);
    if (const io::JsonValue *buffer = entry.find("buffer")) {
      if (!reader.integer(*buffer, value, "'buffer'"))
        return std::nullopt;
      operand.buffer = static_cast<int>(value);
    }
    for (const io::JsonValue &size : shape->items()) {
      if (!reader.integer(size, value, "'shape'"))
        return std::nullopt;
      operand.shape.push_back(value);
    }
    if (!reader.integer(*axis, value, "'axis'"))
      return std::nullopt;
    operand.axis = static_cast<int>(value);
    if (!reader.integer(*block, value, "'block'"))
      return std::nullopt;
    q.format.scaling.blockSize = static_cast<int>(value);
    if (!reader.integer(*rotationBlock, value, "'rotation_block'"))
      return std::nullopt;
    q.rotation.blockSize = static_cast<int>(value);
    if (!reader.integer(*rotationSeed, value, "'rotation_seed'"))
      return std::nullopt;
    q.rotation.seed = static_cast<uint64_t>(value);
    if (!reader.integer(*tensorId, value, "'tensor_id'"))
      return std::nullopt;
    operand.tensorId = static_cast<uint32_t>(value);
    auto parsedElement = numerics::parseElementFormat(element->asString());
    auto parsedScale = parseIn(kScaleFormats, scale->asString());
    auto parsedRule = numerics::parseScaleRule(rule->asString());
    auto parsedRounding = numerics::parseRounding(rounding->asString());
    auto parsedRotation = parseIn(kRotationKinds, rotation->asString());
    auto parsedSigns = parseIn(kSignSchedules, signs->asString());
    if (!parsedElement || !parsedScale || !parsedRule || !parsedRounding ||
        !parsedRotation || !parsedSigns) {
      reader.fail("gemm operand '" + operand.name +
                  "': unknown element, scale, rule, rounding, rotation or "
                  "signs name");
      return std::nullopt;
    }
    if (q.format.scaling.blockSize > 0 &&
        numerics::scaleFormatOf(*parsedRule) != *parsedScale) {
      reader.fail("gemm operand '" + operand.name + "': scale rule '" +
                  rule->asString() + "' is not a rule of " +
                  scale->asString() + " block scales");
      return std::nullopt;
    }
    q.format.element = *parsedElement;
    q.format.scaling.scaleFormat = *parsedScale;
    q.format.scaling.rule = *parsedRule;
    q.format.rounding = *parsedRounding;
    q.rotation.kind = *parsedRotation;
    q.rotation.schedule = *parsedSigns;
    gemm.operands.push_back(std::move(operand));
  }
  return gemm;
}

} // namespace

io::Expected<Schedule> tetra::schedule::fromJson(std::string_view text) {
  using Kind = io::JsonValue::Kind;
  io::Expected<io::JsonValue> parsed = io::parseJson(text);
  if (!parsed)
    return io::Error("schedule: " + parsed.error().message());
  const io::JsonValue &root = *parsed;
  Schedule schedule;
  Reader top("schedule");
  if (!root.isObject())
    return io::Error("schedule: not a JSON object");
  const io::JsonValue *name = top.field(root, "name", Kind::String);
  const io::JsonValue *arena = top.field(root, "arena_bytes", Kind::Number);
  const io::JsonValue *buffers = top.field(root, "buffers", Kind::Array);
  const io::JsonValue *launches = top.field(root, "launches", Kind::Array);
  if (!top.error.empty())
    return io::Error(top.error);
  schedule.name = name->asString();
  if (!top.integer(*arena, schedule.arenaBytes, "'arena_bytes'"))
    return io::Error(top.error);
  if (const io::JsonValue *phases = root.find("phases")) {
    Reader reader("schedule.phases");
    const io::JsonValue *forward =
        reader.field(*phases, "forward_end", Kind::Number);
    const io::JsonValue *gradients =
        reader.field(*phases, "gradients_end", Kind::Number);
    const io::JsonValue *update =
        reader.field(*phases, "update_begin", Kind::Number);
    int64_t values[3] = {-1, -1, -1};
    if (!reader.error.empty() ||
        !reader.integer(*forward, values[0], "'forward_end'") ||
        !reader.integer(*gradients, values[1], "'gradients_end'") ||
        !reader.integer(*update, values[2], "'update_begin'"))
      return io::Error(reader.error);
    schedule.phases = {static_cast<int>(values[0]), static_cast<int>(values[1]),
                       static_cast<int>(values[2])};
  }

  for (size_t i = 0; i < buffers->items().size(); ++i) {
    const io::JsonValue &item = buffers->items()[i];
    Reader reader(fmt::format("buffers[{}]", i));
    if (!item.isObject())
      return io::Error(reader.path + ": not an object");
    BufferDesc buffer;
    const io::JsonValue *bufferName = reader.field(item, "name", Kind::String);
    const io::JsonValue *role = reader.field(item, "role", Kind::String);
    const io::JsonValue *type = reader.field(item, "type", Kind::String);
    const io::JsonValue *shape = reader.field(item, "shape", Kind::Array);
    if (!reader.error.empty())
      return io::Error(reader.error);
    buffer.name = bufferName->asString();
    bool knownRole = false;
    for (BufferRole candidate : kRoles)
      if (bufferRoleName(candidate) == role->asString()) {
        buffer.role = candidate;
        knownRole = true;
      }
    if (!knownRole)
      return io::Error(reader.path + ": unknown role '" + role->asString() +
                       "'");
    if (type->asString() == backend::elementTypeName(backend::ElementType::F32))
      buffer.type = backend::ElementType::F32;
    else if (type->asString() ==
             backend::elementTypeName(backend::ElementType::I32))
      buffer.type = backend::ElementType::I32;
    else
      return io::Error(reader.path + ": unknown type '" + type->asString() +
                       "'");
    for (const io::JsonValue &size : shape->items()) {
      int64_t value;
      if (!reader.integer(size, value, "'shape'") || value < 0)
        return io::Error(reader.error.empty()
                             ? reader.path + ": negative size in 'shape'"
                             : reader.error);
      buffer.shape.push_back(value);
    }
    if (buffer.role == BufferRole::Temporary) {
      const io::JsonValue *offset = reader.field(item, "offset", Kind::Number);
      if (!offset || !reader.integer(*offset, buffer.offset, "'offset'"))
        return io::Error(reader.error);
    }
    if (buffer.role == BufferRole::Constant) {
      const io::JsonValue *splat = reader.field(item, "splat", Kind::Number);
      if (!splat)
        return io::Error(reader.error);
      buffer.splat = splat->asDouble();
    }
    schedule.buffers.push_back(std::move(buffer));
  }

  for (size_t i = 0; i < launches->items().size(); ++i) {
    const io::JsonValue &item = launches->items()[i];
    Reader reader(fmt::format("launches[{}]", i));
    if (!item.isObject())
      return io::Error(reader.path + ": not an object");
    Launch launch;
    const io::JsonValue *kernel = reader.field(item, "kernel", Kind::String);
    const io::JsonValue *args = reader.field(item, "buffers", Kind::Array);
    const io::JsonValue *scalars = reader.field(item, "scalars", Kind::Array);
    const io::JsonValue *origin = reader.field(item, "origin", Kind::String);
    if (!reader.error.empty())
      return io::Error(reader.error);
    launch.kernel = kernel->asString();
    launch.origin = origin->asString();
    for (const io::JsonValue &arg : args->items()) {
      int64_t index;
      if (!reader.integer(arg, index, "'buffers'"))
        return io::Error(reader.error);
      launch.buffers.push_back(static_cast<int>(index));
    }
    for (const io::JsonValue &pair : scalars->items()) {
      if (!pair.isArray() || pair.items().size() != 2 ||
          !pair.items()[0].isString() || !pair.items()[1].isNumber())
        return io::Error(reader.path +
                         ": a scalar is [\"i\", integer] or [\"f\", number]");
      const std::string &kind = pair.items()[0].asString();
      if (kind == "i") {
        int64_t value;
        if (!reader.integer(pair.items()[1], value, "an \"i\" scalar"))
          return io::Error(reader.error);
        launch.scalars.push_back(backend::Scalar::integer(value));
      } else if (kind == "f") {
        launch.scalars.push_back(
            backend::Scalar::real(pair.items()[1].asDouble()));
      } else {
        return io::Error(reader.path + ": unknown scalar kind '" + kind + "'");
      }
    }
    if (const io::JsonValue *bound = item.find("bound_scalars")) {
      if (!bound->isObject())
        return io::Error(reader.path + ": 'bound_scalars' must be object");
      for (const io::JsonMember &member : bound->members()) {
        int64_t position;
        if (!reader.integer(member.value, position, "a bound scalar"))
          return io::Error(reader.error);
        launch.boundScalars.push_back({static_cast<int>(position), member.key});
      }
    }
    if (const io::JsonValue *gemm = item.find("gemm")) {
      Reader gemmReader(reader.path + ".gemm");
      if (!gemm->isObject())
        return io::Error(gemmReader.path + ": not an object");
      launch.gemm = gemmFromJson(*gemm, gemmReader);
      if (!launch.gemm)
        return io::Error(gemmReader.error);
    }
    for (auto [key, dims] :
         {std::pair{"grid", launch.config.grid},
          std::pair{"block", launch.config.block}}) {
      const io::JsonValue *found = item.find(key);
      if (!found)
        continue;
      if (!found->isArray() || found->items().size() != 3)
        return io::Error(reader.path + ": '" + key +
                         "' must be three positive integers");
      for (int d = 0; d < 3; ++d) {
        int64_t value;
        if (!reader.integer(found->items()[d], value, key) || value < 1 ||
            value > 0x7FFFFFFF)
          return io::Error(reader.path + ": '" + key +
                           "' must be three positive integers");
        dims[d] = static_cast<uint32_t>(value);
      }
    }
    if (const io::JsonValue *pairs = item.find("in_place")) {
      bool good = pairs->isArray();
      for (size_t p = 0; good && p < pairs->items().size(); ++p) {
        const io::JsonValue &pair = pairs->items()[p];
        int64_t output, input;
        good = pair.isArray() && pair.items().size() == 2 &&
               reader.integer(pair.items()[0], output, "in_place") &&
               reader.integer(pair.items()[1], input, "in_place") &&
               output >= 0 && input >= 0 &&
               output < static_cast<int64_t>(launch.buffers.size()) &&
               input < static_cast<int64_t>(launch.buffers.size());
        if (good)
          launch.inPlace.push_back(
              {static_cast<int>(output), static_cast<int>(input)});
      }
      if (!good)
        return io::Error(reader.path +
                         ": 'in_place' must be [output, input] argument "
                         "pairs");
    }
    if (const io::JsonValue *shared = item.find("shared_bytes")) {
      int64_t value;
      if (!reader.integer(*shared, value, "shared_bytes") || value < 0 ||
          value > 0x7FFFFFFF)
        return io::Error(reader.path +
                         ": 'shared_bytes' must be a byte count");
      launch.config.sharedMemoryBytes = static_cast<uint32_t>(value);
    }
    schedule.launches.push_back(std::move(launch));
  }
  if (io::Status valid = validate(schedule); !valid)
    return valid.error();
  return schedule;
}
