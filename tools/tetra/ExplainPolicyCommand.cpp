//===- ExplainPolicyCommand.cpp - tetra explain-policy --------------------===//
//
// `tetra explain-policy MODEL POLICY`: the policy resolved for every linear
// of the model, one row per linear and GEMM role — the format of each
// operand, the scale rule, the rounding, the rotation and the accumulator —
// each value marked with the number of the setting that chose it, the
// settings listed under the table. Rows that differ only in a layer index
// are grouped (`layers.{0..31}.attn.wq`) unless --all is given; --json dumps
// every field and its origin for scripts. See docs/tools/explain-policy.md.
//
//===----------------------------------------------------------------------===//

#include "tools/tetra/Commands.h"

#include "frontend/Diagnostics.h"
#include "frontend/Frontend.h"
#include "frontend/Policy.h"
#include "frontend/PolicyAST.h"
#include "frontend/PolicyGlob.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>
#include <string>

using namespace tetra;
using namespace tetra::frontend;

namespace {

constexpr const char *kPrefix = "tetra explain-policy: ";

struct ExplainOptions {
  std::string model;
  std::string policy;
  std::optional<std::string> linearGlob;
  bool all = false;
  bool json = false;
};

/// Parses the arguments; false (with a message printed) on a bad one.
bool parseOptions(const std::vector<std::string_view> &args,
                  ExplainOptions &options, bool &wantsHelp) {
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "-h" || arg == "--help") {
      wantsHelp = true;
      return true;
    }
    if (arg == "--all") {
      options.all = true;
      continue;
    }
    if (arg == "--json") {
      options.json = true;
      continue;
    }
    if (arg == "--linear" || arg.substr(0, 9) == "--linear=") {
      if (arg == "--linear") {
        if (i + 1 >= args.size()) {
          llvm::errs() << kPrefix << "error: --linear needs a pattern (e.g. "
                       << "--linear 'layers.0.**')\n";
          return false;
        }
        options.linearGlob = std::string(args[++i]);
      } else {
        options.linearGlob = std::string(arg.substr(9));
      }
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      llvm::errs() << kPrefix << "error: unknown option '" << arg
                   << "' (see 'tetra explain-policy --help')\n";
      return false;
    }
    positional.emplace_back(arg);
  }
  if (positional.empty() || positional.size() > 2) {
    llvm::errs() << kPrefix << "error: expected a run file, or a model file "
                 << "and a policy file, got " << positional.size() << " files"
                 << " (usage: tetra explain-policy RUN | MODEL POLICY)\n";
    return false;
  }
  // One file: a run, which names its model and policy (resolved below).
  options.model = positional[0];
  if (positional.size() == 2)
    options.policy = positional[1];
  return true;
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

/// A value shown in a cell, with the origin that set it (-1: built-in).
struct Part {
  std::string value;
  int origin = -1;
};
using Cell = std::vector<Part>; ///< Parts are joined by " / ".

/// Registers the distinct origins, in the order cells first mention them.
class OriginTable {
public:
  int intern(const FieldOrigin &origin) {
    if (origin.isBuiltIn())
      return -1;
    std::string key =
        fmt::format("{}\x1f{}", origin.description,
                    reinterpret_cast<uintptr_t>(origin.loc.getPointer()));
    auto [it, inserted] = ids.try_emplace(key, origins.size());
    if (inserted)
      origins.push_back(origin);
    return it->second;
  }
  const FieldOrigin &get(int id) const { return origins[id]; }

private:
  llvm::StringMap<int> ids;
  std::vector<FieldOrigin> origins;
};

/// The cells of one linear and role: lhs, rhs, rule, round, rotate, acc.
std::vector<Cell> makeCells(const RolePolicy &role, OriginTable &origins) {
  std::vector<Cell> cells;
  auto one = [&](std::string value, const FieldOrigin &origin) {
    return Part{std::move(value), origins.intern(origin)};
  };
  cells.push_back({one(role.lhs.format.describe(), role.lhs.formatOrigin)});
  cells.push_back({one(role.rhs.format.describe(), role.rhs.formatOrigin)});
  // Per-operand fields: one part when both operands agree.
  auto pair = [&](Part lhs, Part rhs) -> Cell {
    if (lhs.value == rhs.value && lhs.origin == rhs.origin)
      return {lhs};
    return {lhs, rhs};
  };
  auto rule = [&](const OperandPolicy &op) {
    if (!op.format.hasBlockScale())
      return Part{"-", -1};
    return one(std::string(numerics::scaleRuleName(op.rule)), op.ruleOrigin);
  };
  auto round = [&](const OperandPolicy &op) {
    if (!op.format.isRounded())
      return Part{"-", -1};
    return one(std::string(numerics::roundingName(op.rounding)),
               op.roundingOrigin);
  };
  cells.push_back(pair(rule(role.lhs), rule(role.rhs)));
  cells.push_back(pair(round(role.lhs), round(role.rhs)));
  cells.push_back({one(describeRotation(role.rotation), role.rotationOrigin)});
  cells.push_back({one(role.accumulate, role.accumulateOrigin)});
  return cells;
}

/// A row: a role of one linear, or of several that differ only in their
/// integer segments and have identical cells.
struct Row {
  std::vector<size_t> members; ///< Indices into the resolved linears.
  int role = 0;
  std::vector<Cell> cells;
  std::string name; ///< The linear, or a glob naming the members.
};

/// Splits a name into its shape ("layers.#.attn.wq") and its integer
/// segments.
std::string shapeOf(llvm::StringRef name, std::vector<int64_t> &numbers) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  name.split(parts, '.');
  std::string shape;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i)
      shape += '.';
    int64_t value;
    if (!parts[i].empty() && llvm::all_of(parts[i], llvm::isDigit) &&
        (parts[i].size() == 1 || parts[i][0] != '0') && parts[i].size() < 18 &&
        !parts[i].getAsInteger(10, value)) {
      numbers.push_back(value);
      shape += '#';
    } else {
      shape += parts[i].str();
    }
  }
  return shape;
}

/// {0..3}, {0,31}, {0..3,7} or a lone integer: a glob for `values`.
std::string compressIntegers(std::vector<int64_t> values) {
  llvm::sort(values);
  values.erase(std::unique(values.begin(), values.end()), values.end());
  if (values.size() == 1)
    return std::to_string(values.front());
  std::vector<std::string> items;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1)
      ++j;
    if (j - i >= 2) {
      items.push_back(fmt::format("{}..{}", values[i], values[j]));
    } else {
      for (size_t k = i; k <= j; ++k)
        items.push_back(std::to_string(values[k]));
    }
    i = j + 1;
  }
  return "{" + llvm::join(items, ",") + "}";
}

/// Replaces the '#'s of `shape` by the integer sets of the members.
std::string groupName(llvm::StringRef shape,
                      const std::vector<std::vector<int64_t>> &numbers) {
  std::string name;
  size_t position = 0;
  for (char c : shape) {
    if (c != '#') {
      name += c;
      continue;
    }
    std::vector<int64_t> values;
    for (const std::vector<int64_t> &member : numbers)
      values.push_back(member[position]);
    name += compressIntegers(values);
    ++position;
  }
  return name;
}

std::vector<Row> makeRows(const std::vector<const LinearPolicy *> &linears,
                          OriginTable &origins, bool group) {
  struct Group {
    std::string shape;
    int role;
    std::vector<Cell> cells;
    std::vector<size_t> members;
    std::vector<std::vector<int64_t>> numbers;
  };
  std::vector<Group> groups;
  std::map<std::string, size_t> groupIndex;
  std::map<std::string, size_t> shapeOrder;
  auto cellKey = [](const std::vector<Cell> &cells) {
    std::string key;
    for (const Cell &cell : cells) {
      for (const Part &part : cell)
        key += fmt::format("{}\x1e{}\x1e", part.value, part.origin);
      key += "\x1f";
    }
    return key;
  };
  for (size_t i = 0; i < linears.size(); ++i) {
    std::vector<int64_t> numbers;
    std::string shape =
        group ? shapeOf(linears[i]->linear, numbers) : linears[i]->linear;
    shapeOrder.try_emplace(shape, shapeOrder.size());
    for (int role = 0; role < 3; ++role) {
      std::vector<Cell> cells = makeCells(linears[i]->roles[role], origins);
      std::string key =
          fmt::format("{}\x1d{}\x1d{}", shape, role, cellKey(cells));
      auto [it, inserted] = groupIndex.try_emplace(key, groups.size());
      if (inserted)
        groups.push_back({shape, role, cells, {}, {}});
      groups[it->second].members.push_back(i);
      groups[it->second].numbers.push_back(numbers);
    }
  }

  std::vector<Row> rows;
  for (const Group &g : groups) {
    // A group prints as one glob only when it is the full product of the
    // integers seen at each position; otherwise one row per member.
    size_t product = 1;
    size_t positions = g.numbers.front().size();
    for (size_t p = 0; p < positions; ++p) {
      std::set<int64_t> distinct;
      for (const std::vector<int64_t> &member : g.numbers)
        distinct.insert(member[p]);
      product *= distinct.size();
    }
    if (!group || g.members.size() == 1 || product != g.members.size()) {
      for (size_t member : g.members)
        rows.push_back({{member}, g.role, g.cells, linears[member]->linear});
      continue;
    }
    rows.push_back({g.members, g.role, g.cells, groupName(g.shape, g.numbers)});
  }
  // The rows of one shape together, in the model's order; then by role
  // (the members of one role are disjoint, so this order is total).
  auto shapeRank = [&](const Row &row) {
    std::vector<int64_t> numbers;
    std::string shape =
        group ? shapeOf(linears[row.members.front()]->linear, numbers)
              : linears[row.members.front()]->linear;
    return shapeOrder[shape];
  };
  llvm::sort(rows, [&](const Row &a, const Row &b) {
    size_t rankA = shapeRank(a), rankB = shapeRank(b);
    if (rankA != rankB)
      return rankA < rankB;
    if (a.role != b.role)
      return a.role < b.role;
    return a.members.front() < b.members.front();
  });
  return rows;
}

std::string fileLine(llvm::SourceMgr &sourceMgr, llvm::SMLoc loc) {
  unsigned buffer = sourceMgr.FindBufferContainingLoc(loc);
  if (!buffer)
    return "";
  return (llvm::sys::path::filename(
              sourceMgr.getMemoryBuffer(buffer)->getBufferIdentifier()) +
          ":" + llvm::Twine(sourceMgr.getLineAndColumn(loc, buffer).first))
      .str();
}

/// The origin's description without the "base.tetra: " prefix of a base
/// policy (the file is printed next to it).
std::string shortDescription(const FieldOrigin &origin,
                             llvm::SourceMgr &sourceMgr) {
  llvm::StringRef description = origin.description;
  unsigned buffer = sourceMgr.FindBufferContainingLoc(origin.loc);
  if (buffer) {
    std::string prefix =
        llvm::sys::path::filename(
            sourceMgr.getMemoryBuffer(buffer)->getBufferIdentifier())
            .str() +
        ": ";
    description.consume_front(prefix);
  }
  return description.str();
}

void printTable(const ResolvedPolicy &policy, const ModelGraph &model,
                const std::vector<const LinearPolicy *> &linears, bool group,
                llvm::SourceMgr &sourceMgr, llvm::raw_ostream &os) {
  OriginTable origins;
  std::vector<Row> rows = makeRows(linears, origins, group);

  // Footnote numbers in the order the table mentions the origins.
  std::map<int, int> number;
  std::vector<int> order;
  for (const Row &row : rows)
    for (const Cell &cell : row.cells)
      for (const Part &part : cell)
        if (part.origin >= 0 &&
            number.try_emplace(part.origin, order.size() + 1).second)
          order.push_back(part.origin);

  auto render = [&](const Cell &cell) {
    std::vector<std::string> parts;
    for (const Part &part : cell)
      parts.push_back(part.origin < 0 ? part.value
                                      : fmt::format("{} [{}]", part.value,
                                                    number[part.origin]));
    return llvm::join(parts, " / ");
  };

  std::vector<std::vector<std::string>> table;
  table.push_back(
      {"LINEAR", "ROLE", "LHS", "RHS", "RULE", "ROUND", "ROTATE", "ACC"});
  for (const Row &row : rows) {
    std::vector<std::string> line = {
        row.name, roleName(static_cast<GemmRole>(row.role)).str()};
    for (const Cell &cell : row.cells)
      line.push_back(render(cell));
    table.push_back(std::move(line));
  }
  std::vector<size_t> widths(table.front().size(), 0);
  for (const auto &line : table)
    for (size_t c = 0; c < line.size(); ++c)
      widths[c] = std::max(widths[c], line[c].size());

  // Header.
  os << "policy " << policy.name << " (" << policy.path;
  if (policy.files.size() > 1) {
    // The chain, nearest base first.
    os << "; extends ";
    std::vector<std::string> bases;
    for (size_t i = policy.files.size() - 1; i-- > 0;)
      bases.push_back(llvm::sys::path::filename(policy.files[i]).str());
    os << llvm::join(bases, ", ");
  }
  os << ")\n";
  size_t count = linears.size();
  os << "model " << model.name << ": " << count << " linear"
     << (count == 1 ? "" : "s");
  if (count != policy.linears.size())
    os << " of " << policy.linears.size();
  os << ", 3 GEMMs each";
  if (group)
    os << "; rows that differ only in a layer index are grouped (--all "
          "lists every linear)";
  os << "\nattention: " << policy.attention << " operands";
  if (policy.attentionOrigin.isBuiltIn())
    os << " (built-in)";
  else
    os << " (" << fileLine(sourceMgr, policy.attentionOrigin.loc) << "  "
       << policy.attentionOrigin.setting << ")";
  os << "\n\n";

  for (const auto &line : table) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      text += line[c];
      if (c + 1 < line.size())
        text += std::string(widths[c] - line[c].size() + 2, ' ');
    }
    os << llvm::StringRef(text).rtrim() << "\n";
  }

  os << "\n";
  if (!order.empty()) {
    std::vector<std::string> descriptions, places;
    size_t descriptionWidth = 0, placeWidth = 0;
    for (int id : order) {
      const FieldOrigin &origin = origins.get(id);
      descriptions.push_back(shortDescription(origin, sourceMgr));
      places.push_back(fileLine(sourceMgr, origin.loc));
      descriptionWidth = std::max(descriptionWidth, descriptions.back().size());
      placeWidth = std::max(placeWidth, places.back().size());
    }
    size_t numberWidth = std::to_string(order.size()).size() + 2;
    for (size_t i = 0; i < order.size(); ++i) {
      std::string label = fmt::format("[{}]", i + 1);
      os << label << std::string(numberWidth - label.size() + 1, ' ')
         << places[i] << std::string(placeWidth - places[i].size() + 2, ' ')
         << descriptions[i]
         << std::string(descriptionWidth - descriptions[i].size() + 2, ' ')
         << origins.get(order[i]).setting << "\n";
    }
    os << "\n";
  }
  os << "Operands: fprop Y = X.W^T (lhs X, rhs W); dgrad dX = dY.W (lhs dY, "
        "rhs W);\nwgrad dW = dY^T.X (lhs dY, rhs X). Where lhs and rhs "
        "differ a cell reads 'lhs / rhs'.\nUnmarked values are built-in; "
        "'-': does not apply to the format.\n";
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

void printJson(const ResolvedPolicy &policy, const ModelGraph &model,
               const std::vector<const LinearPolicy *> &linears,
               DiagnosticEngine &diags, llvm::raw_ostream &os) {
  llvm::json::OStream json(os, 2);
  auto field = [&](llvm::StringRef name, std::optional<std::string> value,
                   const FieldOrigin &origin) {
    json.attributeObject(name, [&] {
      if (value)
        json.attribute("value", *value);
      else
        json.attribute("value", nullptr);
      json.attribute("origin", origin.description);
      if (origin.isBuiltIn()) {
        json.attribute("at", nullptr);
      } else {
        json.attribute("at", diags.describe(origin.loc));
        json.attribute("setting", origin.setting);
      }
    });
  };
  auto operand = [&](llvm::StringRef name, const OperandPolicy &op) {
    json.attributeObject(name, [&] {
      field("format", op.format.describe(), op.formatOrigin);
      field("rule",
            op.format.hasBlockScale()
                ? std::optional<std::string>(numerics::scaleRuleName(op.rule))
                : std::nullopt,
            op.ruleOrigin);
      field("round",
            op.format.isRounded() ? std::optional<std::string>(
                                        numerics::roundingName(op.rounding))
                                  : std::nullopt,
            op.roundingOrigin);
    });
  };
  json.object([&] {
    json.attribute("policy", policy.name);
    json.attribute("path", policy.path);
    json.attributeArray("files", [&] {
      for (const std::string &file : policy.files)
        json.value(file);
    });
    json.attribute("model", model.name);
    field("attention", policy.attention, policy.attentionOrigin);
    json.attributeArray("linears", [&] {
      for (const LinearPolicy *linear : linears)
        json.object([&] {
          json.attribute("linear", linear->linear);
          for (int role = 0; role < 3; ++role) {
            const RolePolicy &r = linear->roles[role];
            json.attributeObject(roleName(static_cast<GemmRole>(role)), [&] {
              operand("lhs", r.lhs);
              operand("rhs", r.rhs);
              field("rotate", describeRotation(r.rotation), r.rotationOrigin);
              field("acc", r.accumulate, r.accumulateOrigin);
            });
          }
        });
    });
  });
  os << "\n";
}

} // namespace

void tetra::driver::printExplainPolicyHelp() {
  llvm::outs()
      << "USAGE: tetra explain-policy MODEL POLICY [options]\n"
         "       tetra explain-policy RUN [options]   (the run's model and policy)\n"
         "\n"
         "Resolves the policy for every linear of the model and prints, per\n"
         "linear and GEMM role (fprop, dgrad, wgrad), each operand's format,\n"
         "the scale rule, the rounding, the rotation and the accumulator, "
         "each\n"
         "value marked [n] with the setting that chose it (listed under the\n"
         "table; unmarked values are built-in). Rows that differ only in a\n"
         "layer index are grouped: layers.{0..31}.attn.wq.\n"
         "\n"
         "OPTIONS:\n"
         "  --linear GLOB  only the linears GLOB matches (the policy's glob\n"
         "                 syntax: *, **, {a,b}, {0..3})\n"
         "  --all          one row per linear (no grouping)\n"
         "  --json         every field of every linear with its origin, as "
         "JSON\n"
         "  -h, --help     this help\n";
}

int tetra::driver::explainPolicyMain(
    const std::vector<std::string_view> &args) {
  ExplainOptions options;
  bool wantsHelp = false;
  if (!parseOptions(args, options, wantsHelp))
    return 1;
  if (wantsHelp) {
    printExplainPolicyHelp();
    return 0;
  }

  std::optional<Glob> filter;
  if (options.linearGlob) {
    GlobError error;
    filter = Glob::compile(*options.linearGlob, error);
    if (!filter) {
      llvm::errs() << kPrefix << "error: invalid --linear pattern '"
                   << *options.linearGlob << "': " << error.message
                   << " (at offset " << error.offset << ")\n";
      return 1;
    }
  }

  llvm::SourceMgr sourceMgr;
  DiagnosticEngine diags(sourceMgr);
  if (options.policy.empty()) {
    std::optional<FileKind> kind = detectFileKind(diags, options.model);
    if (!kind)
      return 1;
    if (*kind != FileKind::Run) {
      llvm::errs() << kPrefix << "error: '" << options.model
                   << "' is not a run file; give a run file, or a model file "
                   << "and a policy file (usage: tetra explain-policy RUN | "
                   << "MODEL POLICY)\n";
      return 1;
    }
    std::optional<RunConfig> run = loadRun(diags, options.model);
    if (!run)
      return 1;
    options.model = run->modelPath;
    options.policy = run->policyPath;
  }
  std::optional<ModelGraph> model = loadModel(diags, options.model);
  if (!model)
    return 1;
  std::vector<std::string> linearNames = model->linearNames();
  std::optional<ResolvedPolicy> policy =
      loadPolicy(diags, options.policy, linearNames);
  if (!policy)
    return 1;

  std::vector<const LinearPolicy *> linears;
  for (const LinearPolicy &linear : policy->linears)
    if (!filter || filter->matches(linear.linear))
      linears.push_back(&linear);
  if (linears.empty() && !filter) {
    llvm::errs() << kPrefix << "error: the model has no linear\n";
    return 1;
  }
  if (linears.empty()) {
    std::string suggestion = filter->suggest(linearNames);
    llvm::errs() << kPrefix << "error: --linear '" << *options.linearGlob
                 << "' matches no linear of the model";
    if (!suggestion.empty())
      llvm::errs() << "; did you mean '" << suggestion << "'?";
    llvm::errs() << "\n";
    return 1;
  }

  if (options.json)
    printJson(*policy, *model, linears, diags, llvm::outs());
  else
    printTable(*policy, *model, linears, !options.all, sourceMgr, llvm::outs());
  return 0;
}
