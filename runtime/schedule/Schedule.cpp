//===- Schedule.cpp - A training step as a flat list of launches ----------===//

#include "runtime/schedule/Schedule.h"

#include "runtime/io/Json.h"

#include <algorithm>
#include <numeric>

using namespace tetra;
using namespace tetra::schedule;

namespace {

constexpr BufferRole kRoles[] = {BufferRole::Parameter, BufferRole::AdamM,
                                 BufferRole::AdamV,     BufferRole::Input,
                                 BufferRole::Output,    BufferRole::Temporary,
                                 BufferRole::Constant};

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
  case BufferRole::Temporary:
    return "temporary";
  case BufferRole::Constant:
    return "constant";
  }
  return "";
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

void tetra::schedule::planMemory(Schedule &schedule, int64_t alignment) {
  std::vector<std::pair<int, int>> life = lifetimes(schedule);
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(schedule.buffers.size()); ++i)
    if (schedule.buffers[i].role == BufferRole::Temporary)
      order.push_back(i);
  // Largest first, then by first use, then by index: a deterministic order.
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    int64_t sizeA = schedule.buffers[a].bytes();
    int64_t sizeB = schedule.buffers[b].bytes();
    if (sizeA != sizeB)
      return sizeA > sizeB;
    if (life[a].first != life[b].first)
      return life[a].first < life[b].first;
    return a < b;
  });

  struct Placed {
    int64_t begin, end;
    int first, last;
  };
  std::vector<Placed> placed;
  int64_t arena = 0;
  for (int index : order) {
    BufferDesc &buffer = schedule.buffers[index];
    int64_t size = alignUp(std::max<int64_t>(buffer.bytes(), 1), alignment);
    auto [first, last] = life[index];
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
    buffer.offset = best;
    placed.push_back({best, best + size, first, last});
    arena = std::max(arena, best + size);
  }
  schedule.arenaBytes = arena;
}

io::Status tetra::schedule::validate(
    const Schedule &schedule,
    const backend::KernelSignature *(*signatureOf)(std::string_view)) {
  int count = static_cast<int>(schedule.buffers.size());
  for (int i = 0; i < count; ++i) {
    const BufferDesc &buffer = schedule.buffers[i];
    std::string where =
        "buffers[" + std::to_string(i) + "] '" + buffer.name + "': ";
    for (int64_t size : buffer.shape)
      if (size < 0)
        return io::Error(where + "negative size in its shape");
    if (buffer.role == BufferRole::Temporary &&
        (buffer.offset < 0 ||
         buffer.offset + buffer.bytes() > schedule.arenaBytes))
      return io::Error(where + "temporary outside the arena (offset " +
                       std::to_string(buffer.offset) + ", " +
                       std::to_string(buffer.bytes()) + " bytes, arena " +
                       std::to_string(schedule.arenaBytes) + ")");
  }
  for (size_t l = 0; l < schedule.launches.size(); ++l) {
    const Launch &launch = schedule.launches[l];
    std::string where =
        "launches[" + std::to_string(l) + "] (" + launch.kernel + "): ";
    for (int buffer : launch.buffers)
      if (buffer < 0 || buffer >= count)
        return io::Error(where + "buffer index " + std::to_string(buffer) +
                         " out of range");
    for (const auto &[position, scalarName] : launch.boundScalars)
      if (position < 0 || position >= static_cast<int>(launch.scalars.size()))
        return io::Error(where + "bound scalar '" + scalarName +
                         "' at position " + std::to_string(position) +
                         " out of range");
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

std::string tetra::schedule::toJson(const Schedule &schedule) {
  using io::JsonValue;
  JsonValue root = JsonValue::object();
  root.set("name", JsonValue::string(schedule.name));
  root.set("arena_bytes", JsonValue::integer(schedule.arenaBytes));
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

  for (size_t i = 0; i < buffers->items().size(); ++i) {
    const io::JsonValue &item = buffers->items()[i];
    Reader reader("buffers[" + std::to_string(i) + "]");
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
    Reader reader("launches[" + std::to_string(i) + "]");
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
    schedule.launches.push_back(std::move(launch));
  }
  if (io::Status valid = validate(schedule); !valid)
    return valid.error();
  return schedule;
}
