//===- Run.h - A checked run file -------------------------------*- C++ -*-===//
//
// A run file (docs/language.md, "Run files") parsed and checked: every
// setting known, typed and in range, paths resolved relative to the run
// file. The trainer consumes this; nothing here opens data files.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_FRONTEND_RUN_H
#define TETRA_FRONTEND_RUN_H

#include "driver/Target.h"
#include "frontend/Diagnostics.h"
#include "runtime/schedule/Recompute.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tetra::frontend {

struct TokenizerConfig {
  enum class Kind { Bytes, GPT2, Llama3 };
  Kind kind = Kind::Bytes;
  std::string path; ///< GPT2: the folder with encoder.json + vocab.bpe;
                    ///< Llama3: tokenizer.model. Resolved.
};

struct ScheduleConfig {
  enum class Kind { Constant, Linear, Cosine };
  Kind kind = Kind::Cosine;
  int64_t warmup = 0; ///< Steps of linear warmup from 0.
  double minLr = 0;   ///< Final lr (Linear, Cosine).
};

struct RunConfig {
  std::string name;
  std::string path;       ///< The run file.
  std::string modelPath;  ///< Resolved.
  std::string policyPath; ///< Resolved.

  std::vector<std::string> trainData; ///< Globs, resolved, not expanded.
  std::vector<std::string> evalData;
  /// Where each glob of trainData / evalData is written (for messages).
  std::vector<llvm::SMLoc> trainDataLocs, evalDataLocs;
  TokenizerConfig tokenizer;
  llvm::SMLoc tokenizerLoc; ///< Where data.tokenizer is written.

  int64_t seqLen = 0;
  int64_t microBatch = 1;
  int64_t accumulation = 1;
  int64_t steps = 0; ///< Exactly one of steps / tokens is set (> 0).
  int64_t tokens = 0;

  double lr = 3e-4;
  double beta1 = 0.9, beta2 = 0.95;
  double eps = 1e-8;
  double weightDecay = 0.1;
  ScheduleConfig schedule;
  double clip = 1.0; ///< Global gradient-norm clip; 0 disables it.
  /// What the backward recomputes instead of keeping from the forward.
  schedule::Recompute recompute = schedule::Recompute::Cheap;

  uint64_t seed = 0;
  Target target = Target::Cpu;

  int64_t evalInterval = 0; ///< 0: no evaluation.
  int64_t evalBatches = 0;
  std::string checkpointDir; ///< Resolved; empty: no checkpoints.
  int64_t checkpointInterval = 0;
  int64_t logInterval = 1;
  /// Steps between measurements of the quantizers' SQNR (0: never; -1, the
  /// default: the log interval).
  int64_t sqnrInterval = -1;
};

/// `emit --stage=ast` for a run file.
bool dumpRunAST(DiagnosticEngine &diags, llvm::StringRef path,
                llvm::raw_ostream &os);

} // namespace tetra::frontend

#endif // TETRA_FRONTEND_RUN_H
