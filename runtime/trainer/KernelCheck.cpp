//===- KernelCheck.cpp - A GPU step's library kernels against the CPU's ---===//
//
// Trainer::checkKernels: while the GPU runs a step, every launch the CPU's
// library also implements is re-run on the CPU from copies of the GPU's
// inputs, taken just before the GPU's launches of it, and its outputs are
// compared element by element.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/CpuBackend.h"
#include "runtime/kernels/Registry.h"
#include "runtime/numerics/Formats.h"
#include "runtime/trainer/Trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

using namespace tetra;
using namespace tetra::trainer;

io::Expected<std::vector<KernelCheck>>
Trainer::checkKernels(const schedule::Schedule &reference,
                      const std::vector<int> &firstLaunch) {
  const schedule::Schedule &gpuSchedule = executor_->schedule();
  const int references = static_cast<int>(reference.launches.size());
  if (static_cast<int>(firstLaunch.size()) != references + 1 ||
      firstLaunch.back() != static_cast<int>(gpuSchedule.launches.size()))
    return io::Error("checkKernels: the reference does not match the step");
  io::Expected<std::unique_ptr<backend::CpuBackend>> cpu =
      backend::CpuBackend::create();
  if (!cpu)
    return cpu.error();
  io::Expected<backend::Module> library = (*cpu)->loadModule(
      backend::CodeObject::cpuTable(kernels::libraryKernels(), "library"));
  if (!library)
    return library.error();

  // The next step's first micro-batch, as runStep runs it.
  std::map<std::string, backend::Scalar> bound = stepScalars(step_ + 1);
  if (io::Status prepared = prepareNextStep(); !prepared)
    return prepared.error();

  // Which reference launch each GPU launch belongs to.
  std::vector<int> owner(gpuSchedule.launches.size());
  for (int l = 0; l < references; ++l)
    for (int g = firstLaunch[l]; g < firstLaunch[l + 1]; ++g)
      owner[g] = l;
  auto kernelOf = [&](int l) -> std::optional<backend::Kernel> {
    io::Expected<backend::Kernel> kernel =
        (*cpu)->getKernel(*library, reference.launches[l].kernel);
    if (!kernel)
      return std::nullopt;
    return *kernel;
  };
  std::map<int, std::vector<uint8_t>> inputs; // schedule buffer -> bytes
  std::vector<KernelCheck> checks;

  // The GPU schedule's buffers: the reference's, then the GPU launches'
  // scratch.
  auto bytesOf = [&](int buffer) {
    return static_cast<size_t>(gpuSchedule.buffers[buffer].bytes());
  };
  auto readGpu = [&](int buffer, std::vector<uint8_t> &into) -> io::Status {
    into.resize(bytesOf(buffer));
    if (io::Status copied = backend_.copyToHost(
            into.data(), executor_->bufferAt(buffer), into.size());
        !copied)
      return copied;
    return backend_.synchronize();
  };
  auto snapshot = [&](int l) -> io::Status {
    inputs.clear();
    if (!kernelOf(l))
      return io::success();
    for (int buffer : reference.launches[l].buffers)
      if (!inputs.count(buffer))
        if (io::Status read = readGpu(buffer, inputs[buffer]); !read)
          return read;
    return io::success();
  };
  auto compare = [&](int l) -> io::Status {
    std::optional<backend::Kernel> kernel = kernelOf(l);
    if (!kernel)
      return io::success();
    const schedule::Launch &launch = reference.launches[l];
    // The CPU's buffers: one per schedule buffer (in-place launches pass
    // one twice), filled from the snapshot.
    std::map<int, backend::Buffer> own;
    for (const auto &[buffer, bytes] : inputs) {
      io::Expected<backend::Buffer> made = (*cpu)->allocate(bytes.size());
      if (!made)
        return made.error();
      own[buffer] = *made;
      if (io::Status copied =
              (*cpu)->copyToDevice(*made, bytes.data(), bytes.size());
          !copied)
        return copied;
    }
    std::vector<backend::Buffer> buffers;
    for (int buffer : launch.buffers)
      buffers.push_back(own[buffer]);
    std::vector<backend::Scalar> scalars = launch.scalars;
    for (const auto &[position, name] : launch.boundScalars)
      scalars[position] = bound[name];
    io::Status ran = (*cpu)->launch(
        *kernel, {}, backend::ArrayView<backend::Buffer>(buffers),
        backend::ArrayView<backend::Scalar>(scalars));
    KernelCheck check;
    check.kernel = launch.kernel;
    check.origin = launch.origin;
    const backend::KernelSignature *signature = (*cpu)->signature(*kernel);
    for (size_t s = 0; signature && s < signature->scalars.size() &&
                       s < scalars.size();
         ++s)
      if (signature->scalars[s].name == "bf16_operands")
        check.roundsOperands = scalars[s].asInt() == 1;
    for (size_t a = 0; ran && signature && a < launch.buffers.size(); ++a) {
      const backend::BufferParam &param =
          signature->buffers[std::min(a, signature->buffers.size() - 1)];
      if (param.access == backend::BufferAccess::In)
        continue;
      const int buffer = launch.buffers[a];
      std::vector<uint8_t> gpu, host(bytesOf(buffer));
      // A result the GPU writes as BF16 codes into another buffer (the
      // compiler's resultAsBF16: each GPU launch of it names a buffer of
      // half the bytes in its place) is compared as the CPU's result
      // rounded to BF16: the codes must be equal, and the values near as
      // fp32's.
      int written = buffer;
      for (int g = firstLaunch[l]; g < firstLaunch[l + 1]; ++g) {
        const std::vector<int> &named = gpuSchedule.launches[g].buffers;
        const int at = a < named.size() ? named[a] : buffer;
        written = g == firstLaunch[l] || written == at ? at : buffer;
      }
      const bool asBF16 = written != buffer &&
                          2 * bytesOf(written) == bytesOf(buffer);
      if (io::Status read = readGpu(asBF16 ? written : buffer, gpu); !read)
        return read;
      if (io::Status copied =
              (*cpu)->copyToHost(host.data(), own[buffer], host.size());
          !copied)
        return copied;
      const size_t count = host.size() / 4;
      // Element i of each side: a BF16 code decodes exactly (code << 16),
      // so equal values are equal codes.
      auto cpuValue = [&](size_t i) {
        float x;
        std::memcpy(&x, host.data() + 4 * i, 4);
        return asBF16 ? numerics::decodeBF16(numerics::encodeBF16(x)) : x;
      };
      auto gpuValue = [&](size_t i) {
        if (asBF16) {
          uint16_t code;
          std::memcpy(&code, gpu.data() + 2 * i, 2);
          return numerics::decodeBF16(code);
        }
        float y;
        std::memcpy(&y, gpu.data() + 4 * i, 4);
        return y;
      };
      double largest = 0, worst = 0;
      int64_t differing = 0;
      for (size_t i = 0; i < count; ++i) {
        const float x = cpuValue(i), y = gpuValue(i);
        if (std::memcmp(&x, &y, 4) != 0)
          ++differing;
        largest = std::max(largest, static_cast<double>(std::fabs(x)));
        double difference = std::fabs(static_cast<double>(x) - y);
        if (!(difference <= worst)) // NaN counts as the worst
          worst = std::isnan(difference) ? INFINITY : difference;
      }
      double error = largest > 0 ? worst / largest : worst;
      for (size_t i = 0; i < count; ++i) {
        const double difference =
            std::fabs(static_cast<double>(cpuValue(i)) - gpuValue(i));
        check.beyond += !(difference <= kKernelCheckTolerance * largest);
      }
      check.differing += differing;
      check.elements += static_cast<int64_t>(count);
      if (error >= check.error) {
        check.error = error;
        check.buffer = reference.buffers[buffer].name;
      }
    }
    for (auto &[buffer, made] : own)
      (void)(*cpu)->free(made);
    if (!ran)
      return io::Error(launch.kernel + " on the CPU: " + ran.error().message());
    checks.push_back(std::move(check));
    return io::success();
  };

  // The first reference launch from l on with GPU launches of its own (the
  // compiler may have folded one into another's: an add into a GEMM's).
  auto launched = [&](int l) {
    while (l < references && firstLaunch[l] == firstLaunch[l + 1])
      ++l;
    return l;
  };
  if (const int first = launched(0); first < references)
    if (io::Status taken = snapshot(first); !taken)
      return taken.error();
  io::Status ran = executor_->runObserving(
      0, static_cast<int>(gpuSchedule.launches.size()), [&](int g) {
        const int l = owner[g];
        if (g + 1 == firstLaunch[l + 1]) {
          if (io::Status compared = compare(l); !compared)
            return compared;
          if (const int next = launched(l + 1); next < references)
            return snapshot(next);
        }
        return io::success();
      });
  if (!ran)
    return ran.error();
  ++step_;
  return checks;
}

io::Expected<std::vector<double>> Trainer::profileStep() {
  if (io::Status prepared = prepareNextStep(); !prepared)
    return prepared.error();
  const int launches =
      static_cast<int>(executor_->schedule().launches.size());
  std::vector<double> seconds(launches, 0.0);
  auto last = std::chrono::steady_clock::now();
  io::Status ran = executor_->runObserving(0, launches, [&](int launch) {
    auto now = std::chrono::steady_clock::now();
    seconds[launch] = std::chrono::duration<double>(now - last).count();
    last = now;
    return io::success();
  });
  if (!ran)
    return ran.error();
  ++step_;
  return seconds;
}

bool tetra::trainer::KernelCheck::passed() const {
  if (error <= kKernelCheckTolerance)
    return true;
  return roundsOperands && error <= kRoundedOperandTolerance &&
         beyond * 100 <= elements;
}
