//===- TokenizeCommand.cpp - tetra tokenize --------------------------------===//
//
// `tetra tokenize --tokenizer gpt2:DIR|llama3:FILE|bytes INPUT... -o OUT`:
// encodes plain text files (.txt, or gzipped .gz) and writes a token file
// (docs/tokenizers.md): a 32-byte header, then little-endian uint32 ids;
// every input file is one document and is followed by the end-of-text id.
// Nothing is written unless every input was read.
//
//===----------------------------------------------------------------------===//

#include "tools/tetra/Commands.h"
#include "runtime/io/AtomicFile.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <string>
#include <thread>

using namespace tetra;
using namespace tetra::tokenizer;

namespace {

constexpr const char *kPrefix = "tetra tokenize: ";

int fail(const std::string &message) {
  fmt::print(stderr, "{}error: {}\n", kPrefix, message);
  return 1;
}

void appendU32(std::string &out, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>(value >> (8 * i) & 0xFF));
}
void appendU64(std::string &out, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>(value >> (8 * i) & 0xFF));
}

} // namespace

namespace tetra::driver {

void printTokenizeHelp() {
  std::printf(
      "USAGE: tetra tokenize --tokenizer SPEC INPUT... -o OUT.tokens\n"
      "\n"
      "Encodes text files (plain, or gzipped when the name ends in .gz) and\n"
      "writes a token file: the 32-byte header \"TETRATOK\", version 1, id\n"
      "width 4, token count, vocabulary size, end-of-text id; then the ids as\n"
      "little-endian uint32. Each input is one document, followed by the\n"
      "end-of-text id. See docs/tokenizers.md.\n"
      "\n"
      "OPTIONS:\n"
      "  --tokenizer SPEC  bytes, gpt2:DIR (encoder.json, vocab.bpe) or\n"
      "                    llama3:FILE (tokenizer.model)\n"
      "  -o FILE           the token file to write\n"
      "  --threads N       encode N files at a time (default: the number of\n"
      "                    cores, at most the number of inputs); the output\n"
      "                    does not depend on N\n"
      "  --quiet           print nothing on success\n");
}

int tokenizeMain(const std::vector<std::string_view> &args) {
  std::string specText, output;
  std::vector<std::string> inputs;
  bool quiet = false;
  unsigned threads = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    auto value = [&](std::string &into) {
      if (i + 1 >= args.size())
        return false;
      into = std::string(args[++i]);
      return true;
    };
    if (arg == "--help" || arg == "-h") {
      printTokenizeHelp();
      return 0;
    }
    if (arg == "--tokenizer") {
      if (!value(specText))
        return fail("--tokenizer needs a value (bytes, gpt2:DIR, llama3:FILE)");
    } else if (arg.substr(0, 12) == "--tokenizer=") {
      specText = std::string(arg.substr(12));
    } else if (arg == "-o") {
      if (!value(output))
        return fail("-o needs a file name");
    } else if (arg == "--threads") {
      std::string text;
      if (!value(text))
        return fail("--threads needs a number");
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), threads);
      if (ec != std::errc() || end != text.data() + text.size() || threads == 0 ||
          threads > 1024)
        return fail("--threads: expected a number from 1 to 1024, got '" + text + "'");
    } else if (arg == "--quiet") {
      quiet = true;
    } else if (!arg.empty() && arg[0] == '-' && arg != "-") {
      return fail("unknown option '" + std::string(arg) +
                  "' (see 'tetra tokenize --help')");
    } else {
      inputs.emplace_back(arg);
    }
  }
  if (specText.empty())
    return fail("no --tokenizer given (bytes, gpt2:DIR, llama3:FILE)");
  if (output.empty())
    return fail("no output file given (-o OUT.tokens)");
  if (inputs.empty())
    return fail("no input files given");

  io::Expected<TokenizerSpec> spec = parseTokenizerSpec(specText);
  if (!spec)
    return fail(spec.error().message());
  io::Expected<std::unique_ptr<Tokenizer>> tokenizer = makeTokenizer(*spec);
  if (!tokenizer)
    return fail(tokenizer.error().message());
  auto start = std::chrono::steady_clock::now();
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<size_t>(threads, inputs.size());

  // Files are handed out one at a time; each worker encodes with its own
  // clone, and the documents are joined in input order.
  std::vector<std::unique_ptr<Tokenizer>> workers;
  workers.push_back(std::move(*tokenizer));
  for (unsigned i = 1; i < threads; ++i) {
    io::Expected<std::unique_ptr<Tokenizer>> clone = workers[0]->clone();
    if (!clone)
      return fail(clone.error().message());
    workers.push_back(clone.take());
  }
  std::vector<std::vector<TokenId>> documents(inputs.size());
  std::vector<std::string> errors(inputs.size());
  std::vector<uint64_t> sizes(inputs.size(), 0);
  std::atomic<size_t> next{0};
  auto work = [&](Tokenizer &worker) {
    for (size_t i; (i = next.fetch_add(1)) < inputs.size();) {
      io::Expected<std::string> text = readTextFile(inputs[i]);
      if (!text) {
        errors[i] = text.error().message();
        continue;
      }
      sizes[i] = text->size();
      worker.encode(*text, documents[i]);
      documents[i].push_back(worker.endOfText());
    }
  };
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < threads; ++i)
    pool.emplace_back(work, std::ref(*workers[i]));
  work(*workers[0]);
  for (std::thread &thread : pool)
    thread.join();
  for (const std::string &error : errors)
    if (!error.empty())
      return fail(error);
  Tokenizer &t = *workers[0];
  uint64_t bytes = 0, count = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bytes += sizes[i];
    count += documents[i].size();
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::string contents = "TETRATOK";
  appendU32(contents, 1); // version
  appendU32(contents, 4); // bytes per id
  appendU64(contents, count);
  appendU32(contents, t.vocabSize());
  appendU32(contents, t.endOfText());
  contents.reserve(contents.size() + 4 * count);
  for (const std::vector<TokenId> &ids : documents)
    for (TokenId id : ids)
      appendU32(contents, id);
  if (io::Status status = io::writeFileAtomically(output, contents); !status)
    return fail(status.error().message());
  if (!quiet)
    fmt::print("wrote {}: {} tokens from {} files ({} bytes, {}), {:.1f} MB/s "
               "with {} threads\n",
               output, count, inputs.size(), bytes, std::string(t.name()),
               seconds > 0 ? bytes / seconds / 1e6 : 0.0, threads);
  return 0;
}

} // namespace tetra::driver
