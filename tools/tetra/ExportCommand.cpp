//===- ExportCommand.cpp - tetra export: a checkpoint for Hugging Face ----===//
//
// `tetra export --format hf RUN.tetra --checkpoint FILE|DIR -o DIR`: the
// parameters of a checkpoint as a Hugging Face Llama that `transformers`'
// LlamaForCausalLM loads — config.json, model.safetensors under Hugging
// Face's names, the tokenizer's files. The run file gives what a checkpoint
// does not hold: the model's constants (RMSNorm's eps, RoPE's theta, the
// heads) and the tokenizer.
//
// Tetra's RoPE rotates interleaved pairs (2i, 2i + 1) of each head, as
// Meta's reference does; Hugging Face's rotates halves (i, i + head_dim/2).
// So the rows of wq and wk are permuted within each head: Tetra's row 2i + j
// becomes row j * head_dim/2 + i — the permutation of transformers'
// convert_llama_weights_to_hf.py. See docs/tools/export.md.
//
//===----------------------------------------------------------------------===//

#include "tools/tetra/Commands.h"
#include "tools/tetra/LoadInputs.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/io/Safetensors.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <set>

using namespace tetra;
using namespace tetra::driver;

namespace {

int usageError(const std::string &message) {
  fmt::print(stderr, "tetra export: error: {} (see 'tetra export --help')\n",
             message);
  return 2;
}

int fail(const std::string &message) {
  fmt::print(stderr, "tetra export: error: {}\n", message);
  return 1;
}

/// A Llama's constants, read off a model that has exactly its parameters.
struct LlamaShape {
  int64_t vocab = 0, dim = 0, layers = 0, heads = 0, kvHeads = 0,
          headDim = 0, ffn = 0;
  double eps = 0, theta = 0;
};

/// The model's Llama constants, or why it is not Llama-shaped.
std::variant<LlamaShape, std::string>
llamaShapeOf(const frontend::ModelGraph &model) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const frontend::Parameter &p : model.parameters)
    shapes[p.name] = p.shape;
  auto shapeOf = [&](const std::string &name) -> const std::vector<int64_t> * {
    auto it = shapes.find(name);
    return it == shapes.end() ? nullptr : &it->second;
  };
  const std::vector<int64_t> *embed = shapeOf("embed");
  if (!embed || embed->size() != 2)
    return std::string("it has no 'embed' table [vocab, dim]");
  LlamaShape s;
  s.vocab = (*embed)[0];
  s.dim = (*embed)[1];
  while (shapeOf(fmt::format("layers.{}.attn.wq", s.layers)))
    ++s.layers;
  if (s.layers == 0)
    return std::string("it has no 'layers.0.attn.wq'");

  // The constants from the ops: one value each across the model.
  std::set<double> eps, theta;
  std::set<std::pair<int64_t, int64_t>> heads;
  std::set<int64_t> headDims;
  for (const frontend::Function &function : model.functions)
    for (const frontend::Op &op : function.ops) {
      if (op.kind == frontend::OpKind::RMSNorm)
        eps.insert(op.eps);
      else if (op.kind == frontend::OpKind::Rope) {
        theta.insert(op.theta);
        headDims.insert(op.headDim);
      } else if (op.kind == frontend::OpKind::Attention)
        heads.insert({op.heads, op.kvHeads});
    }
  if (eps.size() != 1 || theta.size() != 1 || heads.size() != 1 ||
      headDims.size() != 1)
    return std::string("its rmsnorm, rope and attention calls do not share "
                       "one eps, one theta and one head layout");
  s.eps = *eps.begin();
  s.theta = *theta.begin();
  s.heads = heads.begin()->first;
  s.kvHeads = heads.begin()->second;
  s.headDim = *headDims.begin();
  const std::vector<int64_t> *gate = shapeOf("layers.0.mlp.gate");
  if (!gate || gate->size() != 2)
    return std::string("it has no 'layers.0.mlp.gate' [ffn, dim]");
  s.ffn = (*gate)[0];

  // Exactly Llama's parameters, with these shapes.
  std::map<std::string, std::vector<int64_t>> expected = {
      {"embed", {s.vocab, s.dim}},
      {"norm", {s.dim}},
      {"lm_head", {s.vocab, s.dim}}};
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = fmt::format("layers.{}.", i);
    expected[p + "attn_norm"] = {s.dim};
    expected[p + "attn.wq"] = {s.heads * s.headDim, s.dim};
    expected[p + "attn.wk"] = {s.kvHeads * s.headDim, s.dim};
    expected[p + "attn.wv"] = {s.kvHeads * s.headDim, s.dim};
    expected[p + "attn.wo"] = {s.dim, s.heads * s.headDim};
    expected[p + "mlp_norm"] = {s.dim};
    expected[p + "mlp.gate"] = {s.ffn, s.dim};
    expected[p + "mlp.up"] = {s.ffn, s.dim};
    expected[p + "mlp.down"] = {s.dim, s.ffn};
  }
  for (const auto &[name, shape] : expected) {
    const std::vector<int64_t> *actual = shapeOf(name);
    if (!actual)
      return "it has no parameter '" + name + "'";
    if (*actual != shape)
      return "'" + name + "' is not shaped as a Llama's";
  }
  for (const auto &[name, shape] : shapes)
    if (!expected.count(name))
      return "it has a parameter a Llama does not: '" + name + "'";
  if (s.headDim % 2 != 0)
    return std::string("its head_dim is odd");
  return s;
}

/// Hugging Face's name of a Tetra Llama parameter.
std::string huggingFaceName(const std::string &name) {
  static const std::pair<const char *, const char *> kLayer[] = {
      {"attn_norm", "input_layernorm.weight"},
      {"attn.wq", "self_attn.q_proj.weight"},
      {"attn.wk", "self_attn.k_proj.weight"},
      {"attn.wv", "self_attn.v_proj.weight"},
      {"attn.wo", "self_attn.o_proj.weight"},
      {"mlp_norm", "post_attention_layernorm.weight"},
      {"mlp.gate", "mlp.gate_proj.weight"},
      {"mlp.up", "mlp.up_proj.weight"},
      {"mlp.down", "mlp.down_proj.weight"}};
  if (name == "embed")
    return "model.embed_tokens.weight";
  if (name == "norm")
    return "model.norm.weight";
  if (name == "lm_head")
    return "lm_head.weight";
  llvm::StringRef rest = llvm::StringRef(name).drop_front(strlen("layers."));
  auto [layer, field] = rest.split('.');
  for (auto [tetra, hf] : kLayer)
    if (field == tetra)
      return "model.layers." + layer.str() + "." + hf;
  return name;
}

/// Rows of `heads` heads of `headDim` rows, each `columns` floats: Tetra's
/// interleaved RoPE pairs to Hugging Face's halves (row 2i + j of a head to
/// j * headDim/2 + i).
std::vector<uint8_t> toRotateHalf(const std::vector<uint8_t> &bytes,
                                  int64_t heads, int64_t headDim,
                                  int64_t columns) {
  std::vector<uint8_t> out(bytes.size());
  const size_t rowBytes = static_cast<size_t>(columns) * sizeof(float);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < headDim / 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t from = h * headDim + 2 * i + j;
        const int64_t to = h * headDim + j * (headDim / 2) + i;
        std::memcpy(out.data() + to * rowBytes, bytes.data() + from * rowBytes,
                    rowBytes);
      }
  return out;
}

bool copyFile(const std::string &from, const std::string &to,
              std::string &error) {
  if (std::error_code ec = llvm::sys::fs::copy_file(from, to)) {
    error = "cannot copy '" + from + "' to '" + to + "': " + ec.message();
    return false;
  }
  return true;
}

} // namespace

int tetra::driver::exportMain(const std::vector<std::string_view> &args) {
  std::string runPath, checkpointPath, outDir, format;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg(args[i]);
    auto value = [&](std::string &slot) {
      if (i + 1 == args.size())
        return false;
      slot = std::string(args[++i]);
      return true;
    };
    if (arg == "-h" || arg == "--help") {
      printExportHelp();
      return 0;
    }
    if (arg == "--format") {
      if (!value(format))
        return usageError("--format takes a format (hf)");
    } else if (arg == "--checkpoint") {
      if (!value(checkpointPath))
        return usageError("--checkpoint takes a checkpoint file or directory");
    } else if (arg == "-o" || arg == "--out") {
      if (!value(outDir))
        return usageError(arg + " takes a directory");
    } else if (!arg.empty() && arg[0] == '-') {
      return usageError("unknown option '" + arg + "'");
    } else if (runPath.empty()) {
      runPath = arg;
    } else {
      return usageError("one run file at a time ('" + runPath + "', '" + arg +
                        "')");
    }
  }
  if (format.empty())
    return usageError("no format (--format hf)");
  if (format != "hf")
    return usageError("unknown format '" + format +
                      "': the one format is hf (Hugging Face Llama)");
  if (runPath.empty())
    return usageError("no run file (its model and tokenizer are exported)");
  if (checkpointPath.empty())
    return usageError("no checkpoint (--checkpoint FILE|DIR)");
  if (outDir.empty())
    return usageError("no output directory (-o DIR)");

  llvm::SourceMgr sourceMgr;
  frontend::DiagnosticEngine diags(sourceMgr);
  std::optional<LoadedInputs> inputs =
      loadInputs(diags, {runPath}, {}, "tetra export", "an export");
  if (!inputs)
    return 1;
  if (!inputs->run)
    return usageError("'" + runPath + "' is not a run file");
  const frontend::RunConfig &run = *inputs->run;
  const frontend::ModelGraph &model = inputs->model;
  std::variant<LlamaShape, std::string> shaped = llamaShapeOf(model);
  if (auto *why = std::get_if<std::string>(&shaped))
    return fail("model '" + model.name + "' is not Llama-shaped (" + *why +
                "): --format hf exports Llama models only");
  const LlamaShape &s = std::get<LlamaShape>(shaped);

  // The parameters, checked against the model (optimizer state not needed).
  checkpoint::CheckpointSpec spec;
  spec.model = model.name;
  spec.requireOptimizer = false;
  for (const frontend::Parameter &p : model.parameters)
    spec.parameters.push_back({p.name, io::Dtype::F32, p.shape});
  io::Expected<checkpoint::TrainingState> state =
      llvm::sys::fs::is_directory(checkpointPath)
          ? checkpoint::loadLatestCheckpoint(checkpointPath, &spec)
          : checkpoint::loadCheckpoint(checkpointPath, &spec);
  if (!state)
    return fail(state.error().message());

  // Never over another export or any other files.
  if (llvm::sys::fs::exists(outDir)) {
    std::error_code ec;
    llvm::sys::fs::directory_iterator it(outDir, ec);
    if (ec || it != llvm::sys::fs::directory_iterator())
      return fail("'" + outDir +
                  "' exists and is not an empty directory; an export is "
                  "never written over other files");
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(outDir))
    return fail("cannot create '" + outDir + "': " + ec.message());

  io::SafetensorsWriter writer;
  writer.setMetadata("format", "pt"); // what transformers expects
  writer.setMetadata("tetra.run", state->run);
  writer.setMetadata("tetra.step", std::to_string(state->step));
  for (const frontend::Parameter &p : model.parameters) {
    const checkpoint::Tensor *tensor =
        checkpoint::TrainingState::find(state->parameters, p.name);
    std::vector<uint8_t> bytes = tensor->bytes;
    llvm::StringRef name(p.name);
    if (name.ends_with(".attn.wq"))
      bytes = toRotateHalf(bytes, s.heads, s.headDim, s.dim);
    else if (name.ends_with(".attn.wk"))
      bytes = toRotateHalf(bytes, s.kvHeads, s.headDim, s.dim);
    if (io::Status added = writer.addTensor(huggingFaceName(p.name),
                                            io::Dtype::F32, p.shape,
                                            std::move(bytes));
        !added)
      return fail(added.error().message());
  }
  const std::string weights = outDir + "/model.safetensors";
  if (io::Status written = writer.write(weights); !written)
    return fail(written.error().message());

  // The tokenizer's files under the names transformers reads.
  std::string error;
  std::string tokenizerNote;
  llvm::json::Object tokenizerConfig;
  switch (run.tokenizer.kind) {
  case frontend::TokenizerConfig::Kind::GPT2:
    if (!copyFile(run.tokenizer.path + "/encoder.json", outDir + "/vocab.json",
                  error) ||
        !copyFile(run.tokenizer.path + "/vocab.bpe", outDir + "/merges.txt",
                  error))
      return fail(error);
    tokenizerConfig["tokenizer_class"] = "GPT2Tokenizer";
    tokenizerConfig["model_max_length"] = run.seqLen;
    tokenizerConfig["bos_token"] = "<|endoftext|>";
    tokenizerConfig["eos_token"] = "<|endoftext|>";
    tokenizerConfig["unk_token"] = "<|endoftext|>";
    tokenizerNote = "GPT-2's vocab.json and merges.txt";
    break;
  case frontend::TokenizerConfig::Kind::Llama3:
    if (!copyFile(run.tokenizer.path, outDir + "/tokenizer.model", error))
      return fail(error);
    tokenizerNote = "Llama 3's tokenizer.model (tiktoken's format: "
                    "transformers' converter reads it)";
    break;
  case frontend::TokenizerConfig::Kind::Bytes:
    tokenizerNote = "no tokenizer files (the run's tokens are bytes 0-255)";
    break;
  }
  if (!tokenizerConfig.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream os(outDir + "/tokenizer_config.json", ec);
    if (ec)
      return fail("cannot write tokenizer_config.json: " + ec.message());
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(tokenizerConfig)))
       << "\n";
  }

  llvm::json::Object config{
      {"architectures", llvm::json::Array{"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"vocab_size", s.vocab},
      {"hidden_size", s.dim},
      {"intermediate_size", s.ffn},
      {"num_hidden_layers", s.layers},
      {"num_attention_heads", s.heads},
      {"num_key_value_heads", s.kvHeads},
      {"head_dim", s.headDim},
      {"hidden_act", "silu"},
      {"rms_norm_eps", s.eps},
      {"rope_theta", s.theta},
      {"max_position_embeddings", run.seqLen},
      {"attention_bias", false},
      {"mlp_bias", false},
      {"tie_word_embeddings", false},
      {"torch_dtype", "float32"},
      {"initializer_range", 0.02}};
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(outDir + "/config.json", ec);
    if (ec)
      return fail("cannot write config.json: " + ec.message());
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(config))) << "\n";
  }
  fmt::print("tetra export: {} (step {} of {}) as a Hugging Face Llama in {}: "
             "config.json, model.safetensors ({} tensors, fp32; wq and wk "
             "permuted to rotate-half RoPE), {}\n",
             model.name, state->step, state->run, outDir,
             model.parameters.size(), tokenizerNote);
  return 0;
}

void tetra::driver::printExportHelp() {
  std::printf(
      "USAGE: tetra export --format hf RUN.tetra --checkpoint FILE|DIR -o DIR\n"
      "\n"
      "Writes a checkpoint's parameters as a Hugging Face Llama that\n"
      "transformers' LlamaForCausalLM.from_pretrained(DIR) loads:\n"
      "config.json (the run's model constants), model.safetensors (fp32,\n"
      "Hugging Face's names; the query and key rows permuted from Tetra's\n"
      "interleaved RoPE pairs to rotate-half) and the tokenizer's files.\n"
      "Models that are not Llama-shaped are refused. DIR must not exist or\n"
      "be empty.\n"
      "\n"
      "OPTIONS\n"
      "  --format hf            the format (Hugging Face Llama, the one so far)\n"
      "  --checkpoint FILE|DIR  a checkpoint file or directory (its latest)\n"
      "  -o, --out DIR          where the export goes\n"
      "  -h, --help             print this help\n"
      "\n"
      "EXAMPLE\n"
      "  tetra export --format hf models/runs/tiny_c4_cpu.tetra \\\n"
      "      --checkpoint out/tiny_c4_cpu/checkpoints -o out/tiny_hf\n");
}
