//===- Metrics.h - One JSON line per logged step ----------------*- C++ -*-===//
//
// The run's record: `metrics.jsonl` in the run directory, one object per
// logged step ({"run", "step", "loss", "lr", "grad_norm", "tokens_per_s",
// "elapsed_s", "eval_loss" on evaluation steps, and "sqnr_db" on steps that
// measured the quantizers: {"fprop.x": 18.2, ...}), flushed line by line
// so that `tetra plot` can draw a run while it trains. Also the progress
// line: rewritten in place on a terminal, plain lines otherwise.
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
  double loss = 0;
  double lr = 0;
  double gradNorm = 0;
  double tokensPerSecond = 0;
  double elapsedSeconds = 0;
  std::optional<double> evalLoss;
  /// The quantizers' SQNR in dB per GEMM role and operand ("wgrad.dy"), on
  /// the steps that measured it (QuantizationMeter).
  std::map<std::string, double> sqnrDecibels;
};

class MetricsWriter {
public:
  /// Opens (appending, for a resumed run) `path`.
  static io::Expected<MetricsWriter> open(const std::string &path,
                                          std::string run);
  MetricsWriter(MetricsWriter &&other) noexcept;
  ~MetricsWriter();

  io::Status write(const StepRecord &record);

private:
  MetricsWriter(std::FILE *file, std::string run)
      : file_(file), run_(std::move(run)) {}
  std::FILE *file_ = nullptr;
  std::string run_;
};

/// "step 120/200 | loss 3.4121 | lr 8.10e-04 | 15.3k tok/s | ETA 0:42".
std::string progressLine(const StepRecord &record, int64_t totalSteps);

/// Prints the progress line: in place ("\r", no newline) on a terminal,
/// else as a plain line every `interval` steps (and the last).
void printProgress(const StepRecord &record, int64_t totalSteps,
                   int64_t interval, std::FILE *out = stdout);

} // namespace tetra::trainer

#endif // TETRA_RUNTIME_TRAINER_METRICS_H
