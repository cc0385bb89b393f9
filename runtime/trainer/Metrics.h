//===- Metrics.h - One JSON line per logged step ----------------*- C++ -*-===//
//
// The run's record: `metrics.jsonl` in the run directory, one object per
// logged step ({"run", "step", "loss", "lr", "grad_norm", "tokens_per_s",
// "elapsed_s", "eval_loss" on evaluation steps, and "sqnr_db" on steps that
// measured the quantizers: {"fprop.x": 18.2, ...}, with "sm90a_folding_tiles"
// per GEMM role for MXFP4 x MXFP4: {"fprop": 0.97, ...}, and "exact_pairs", the
// fraction of its results that sum exactly), flushed line by line
// so that `tetra plot` can draw a run while it trains. The file reads as one
// uninterrupted run: a fresh run starts it (and refuses to replace another
// run's), a resumed one first drops the lines logged after its checkpoint.
// Also the progress line: rewritten in place on a terminal, plain lines
// otherwise.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_TRAINER_METRICS_H
#define TETRA_RUNTIME_TRAINER_METRICS_H

#include "runtime/io/Error.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

namespace tetra::trainer {

struct StepRecord {
  int64_t step = 0;
  /// Tokens trained on through this step (step x the tokens of a step:
  /// micro-batches x batch x sequence x ranks), the x axis on which
  /// policies are compared (tetra compare).
  int64_t tokens = 0;
  double loss = 0;
  double lr = 0;
  double gradNorm = 0;
  double tokensPerSecond = 0;
  double elapsedSeconds = 0;
  std::optional<double> evalLoss;
  /// The quantizers' SQNR in dB per GEMM role and operand ("wgrad.dy"), on
  /// the steps that measured it (QuantizationMeter).
  std::map<std::string, double> sqnrDecibels;
  /// The same per linear: {"layers.0.attn.wq": {"fprop.x": 18.4, ...}}
  /// ("sqnr_db_linear" in metrics.jsonl).
  std::map<std::string, std::map<std::string, double>> sqnrDecibelsByLinear;
  /// The fraction of MXFP4 x MXFP4 result tiles sm_90a's GEMM folds, per
  /// GEMM role, on the same steps (QuantizationMeter::foldingTiles).
  std::map<std::string, double> foldingTiles;
  /// The fraction of MXFP4 x MXFP4 results that sum exactly, per GEMM role
  /// (QuantizationMeter::exactPairs).
  std::map<std::string, double> exactPairs;
};

class MetricsWriter {
public:
  /// Starts `path` for a fresh run: an error if it holds lines already (an
  /// empty file is replaced).
  static io::Expected<MetricsWriter> create(const std::string &path,
                                            std::string run);
  /// Continues `path` for a run resumed after step `step`: the lines of
  /// later steps (logged before an interruption, and about to be logged
  /// again) are dropped first, atomically; a missing file is started.
  static io::Expected<MetricsWriter> resume(const std::string &path,
                                            std::string run, int64_t step);
  MetricsWriter(MetricsWriter &&other) noexcept;
  ~MetricsWriter();

  io::Status write(const StepRecord &record);

private:
  MetricsWriter(std::FILE *file, std::string run)
      : file_(file), run_(std::move(run)) {}
  std::FILE *file_ = nullptr;
  std::string run_;
};

/// Where a run stands, for its progress line.
struct Progress {
  int64_t totalSteps = 0; ///< The run's steps.
  int64_t stopStep = 0;   ///< Where this process stops (--until, else total).
  /// The steps this process has run and the seconds they took: the ETA
  /// extrapolates them to `stopStep` (a resumed run's earlier steps, run at
  /// another time or on another machine, do not count).
  int64_t stepsRun = 0;
  double secondsRun = 0;
};

/// "step 120/200 | loss 3.4121 | lr 8.10e-04 | 15.3k tok/s | ETA 0:42"
/// (", ETA 0:12 to step 150" when the process stops before the run ends).
std::string progressLine(const StepRecord &record, const Progress &progress);

/// Prints the progress line: in place ("\r", no newline) on a terminal,
/// else as a plain line every `interval` steps. The `last` line of the
/// process (the stop step, or an interruption) is always printed and ends
/// with a newline.
void printProgress(const StepRecord &record, const Progress &progress,
                   int64_t interval, bool last, std::FILE *out = stdout);

} // namespace tetra::trainer

#endif // TETRA_RUNTIME_TRAINER_METRICS_H
