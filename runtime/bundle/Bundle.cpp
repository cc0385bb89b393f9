//===- Bundle.cpp - A compiled bundle, read back --------------------------===//

#include "runtime/bundle/Bundle.h"

#include "runtime/io/AtomicFile.h"

#include <fmt/format.h>

using namespace tetra;
using namespace tetra::bundle;

namespace {

/// The member `key` of `object` of kind `kind`, or an error saying where.
io::Expected<const io::JsonValue *> member(const io::JsonValue &object,
                                           const char *key,
                                           io::JsonValue::Kind kind,
                                           const std::string &where) {
  const io::JsonValue *value = object.find(key);
  if (!value || value->kind() != kind)
    return io::Error(where + ": no " +
                     std::string(io::JsonValue::kindName(kind)) + " \"" + key +
                     "\"");
  return value;
}

io::Expected<std::string> text(const io::JsonValue &object, const char *key,
                               const std::string &where) {
  io::Expected<const io::JsonValue *> value =
      member(object, key, io::JsonValue::Kind::String, where);
  if (!value)
    return value.error();
  return (*value)->asString();
}

io::Status readDimensions(const io::JsonValue &launch, const char *key,
                          uint32_t (&out)[3], const std::string &where) {
  io::Expected<const io::JsonValue *> value =
      member(launch, key, io::JsonValue::Kind::Array, where);
  if (!value)
    return value.error();
  const auto &items = (*value)->items();
  if (items.size() != 3)
    return io::Error(where + ": \"" + key + "\" is not three sizes");
  for (int d = 0; d < 3; ++d) {
    if (!items[d].isInteger() || items[d].asInt64() < 1 ||
        items[d].asInt64() > UINT32_MAX)
      return io::Error(where + ": \"" + key + "\" is not three sizes");
    out[d] = static_cast<uint32_t>(items[d].asInt64());
  }
  return io::success();
}

} // namespace

io::Status Launch::bind(const std::map<std::string, backend::Buffer> &buffers,
                        int64_t seed, int64_t step,
                        std::vector<backend::Buffer> &boundBuffers,
                        std::vector<backend::Scalar> &boundScalars) const {
  boundBuffers.clear();
  boundScalars.clear();
  for (const std::string &argument : arguments) {
    if (argument == "scalar:seed") {
      boundScalars.push_back(backend::Scalar::integer(seed));
    } else if (argument == "scalar:step") {
      boundScalars.push_back(backend::Scalar::integer(step));
    } else {
      auto buffer = buffers.find(argument);
      if (buffer == buffers.end())
        return io::Error(function + ": no buffer for argument '" + argument +
                         "'");
      boundBuffers.push_back(buffer->second);
    }
  }
  return io::success();
}

io::Expected<Bundle> Bundle::open(const std::string &directory) {
  std::string path = directory + "/manifest.json";
  io::Expected<std::string> content = io::readFile(path);
  if (!content)
    return content.error();
  io::Expected<io::JsonValue> manifest = io::parseJson(*content);
  if (!manifest)
    return io::Error(path + ": " + manifest.error().message());
  Bundle bundle;
  bundle.directory = directory;
  const io::JsonValue *format = manifest->find("format");
  if (!format || !format->isString() || format->asString() != "tetra-bundle")
    return io::Error(path + ": not a Tetra bundle manifest");
  for (auto [key, slot] : {std::pair{"target", &bundle.target},
                           std::pair{"model", &bundle.model},
                           std::pair{"policy", &bundle.policy}}) {
    io::Expected<std::string> value = text(*manifest, key, path);
    if (!value)
      return value.error();
    *slot = *value;
  }
  io::Expected<const io::JsonValue *> kernels =
      member(*manifest, "kernels", io::JsonValue::Kind::Array, path);
  if (!kernels)
    return kernels.error();
  for (const io::JsonValue &entry : (*kernels)->items()) {
    Kernel kernel;
    std::string where =
        fmt::format("{}: kernel {}", path, bundle.kernels.size());
    io::Expected<std::string> name = text(entry, "name", where);
    if (!name)
      return name.error();
    kernel.name = *name;
    where = path + ": kernel '" + kernel.name + "'";
    io::Expected<std::string> code = text(entry, "code", where);
    if (!code)
      return code.error();
    if (code->empty() || code->find('/') != std::string::npos)
      return io::Error(where + ": \"code\" must name a file of the bundle");
    kernel.codeFile = *code;
    io::Expected<const io::JsonValue *> computes =
        member(entry, "computes", io::JsonValue::Kind::Object, where);
    if (!computes)
      return computes.error();
    kernel.computes = **computes;
    if (const io::JsonValue *resources = entry.find("resources"))
      kernel.resources = *resources;
    if (const io::JsonValue *scratch = kernel.computes.find("scratch"))
      for (const io::JsonMember &buffer : scratch->members()) {
        if (!buffer.value.isInteger() || buffer.value.asInt64() < 0)
          return io::Error(where + ": scratch '" + buffer.key +
                           "' has no size");
        kernel.scratch["scratch:" + buffer.key] = buffer.value.asInt64();
      }
    io::Expected<const io::JsonValue *> launches =
        member(entry, "launches", io::JsonValue::Kind::Array, where);
    if (!launches)
      return launches.error();
    for (const io::JsonValue &item : (*launches)->items()) {
      Launch launch;
      io::Expected<std::string> function = text(item, "function", where);
      if (!function)
        return function.error();
      launch.function = *function;
      std::string at = where + ", launch '" + launch.function + "'";
      if (io::Status grid = readDimensions(item, "grid", launch.config.grid, at);
          !grid)
        return grid.error();
      if (io::Status block =
              readDimensions(item, "block", launch.config.block, at);
          !block)
        return block.error();
      io::Expected<const io::JsonValue *> arguments =
          member(item, "arguments", io::JsonValue::Kind::Array, at);
      if (!arguments)
        return arguments.error();
      for (const io::JsonValue &argument : (*arguments)->items()) {
        if (!argument.isString())
          return io::Error(at + ": an argument is not a string");
        launch.arguments.push_back(argument.asString());
      }
      kernel.launches.push_back(std::move(launch));
    }
    bundle.kernels.push_back(std::move(kernel));
  }
  return bundle;
}

io::Expected<std::string> Bundle::code(const Kernel &kernel) const {
  return io::readFile(directory + "/" + kernel.codeFile);
}
