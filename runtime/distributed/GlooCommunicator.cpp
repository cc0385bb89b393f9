//===- GlooCommunicator.cpp - CPU ranks through Gloo ----------------------===//

#include "runtime/distributed/GlooCommunicator.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <exception>
#include <unistd.h>
#include <fmt/format.h>
#include <vector>

using namespace tetra;
using namespace tetra::distributed;

namespace {

/// Gloo's rendezvous store over the run's TcpStore. Gloo's interface has no
/// errors: a failure throws, and the communicator's constructor catches it.
class StoreAdapter : public gloo::rendezvous::Store {
public:
  explicit StoreAdapter(TcpStore &store) : store_(store) {}
  void set(const std::string &key, const std::vector<char> &data) override {
    if (io::Status s = store_.set(key, data); !s)
      throw std::runtime_error(s.error().message());
  }
  std::vector<char> get(const std::string &key) override {
    io::Expected<std::vector<char>> value = store_.get(key);
    if (!value)
      throw std::runtime_error(value.error().message());
    return *value;
  }
  void wait(const std::vector<std::string> &keys) override {
    for (const std::string &key : keys)
      get(key);
  }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &) override {
    wait(keys);
  }

private:
  TcpStore &store_;
};

class GlooCommunicator : public Communicator {
public:
  GlooCommunicator(std::shared_ptr<gloo::Context> context,
                   std::chrono::milliseconds timeout)
      : context_(std::move(context)), timeout_(timeout) {}
  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  std::string engine() const override { return "gloo"; }

  io::Status allReduceSum(float *data, size_t count,
                          Reduction reduction) override {
    if (size() == 1 || count == 0)
      return io::success();
    return guarded("all-reduce", [&] {
      if (reduction == Reduction::Sum) {
        sum(data, count);
        return;
      }
      // Fixed order: gather, then ((r0 + r1) + r2) + ... in fp32.
      gathered_.resize(count * static_cast<size_t>(size()));
      gloo::AllgatherOptions options(context_);
      options.setInput(data, count);
      options.setOutput(gathered_.data(), gathered_.size());
      options.setTag(nextTag());
      options.setTimeout(timeout_);
      gloo::allgather(options);
      for (size_t i = 0; i < count; ++i) {
        float sum = gathered_[i];
        for (int r = 1; r < size(); ++r)
          sum += gathered_[static_cast<size_t>(r) * count + i];
        data[i] = sum;
      }
    });
  }

  io::Status allReduceHost(double *data, size_t count) override {
    if (size() == 1 || count == 0)
      return io::success();
    return guarded("all-reduce", [&] { sum(data, count); });
  }

  io::Status broadcast(float *data, size_t count, int root) override {
    if (size() == 1 || count == 0)
      return io::success();
    return guarded("broadcast", [&] {
      gloo::BroadcastOptions options(context_);
      options.setOutput(data, count);
      options.setRoot(root);
      options.setTag(nextTag());
      options.setTimeout(timeout_);
      gloo::broadcast(options);
    });
  }

  io::Status barrier() override {
    if (size() == 1)
      return io::success();
    return guarded("barrier", [&] {
      gloo::BarrierOptions options(context_);
      options.setTag(nextTag());
      options.setTimeout(timeout_);
      gloo::barrier(options);
    });
  }

private:
  /// Gloo's all-reduce (in place, summing); throws on failure.
  template <typename T> void sum(T *data, size_t count) {
    gloo::AllreduceOptions options(context_);
    options.setInput(data, count);
    options.setOutput(data, count);
    options.setReduceFunction(
        static_cast<void (*)(void *, const void *, const void *, size_t)>(
            &gloo::sum<T>));
    options.setTag(nextTag());
    options.setTimeout(timeout_);
    gloo::allreduce(options);
  }
  template <typename F> io::Status guarded(const char *what, F &&run) {
    try {
      run();
      return io::success();
    } catch (const std::exception &error) {
      return io::Error(fmt::format(
          "gloo {} across {} ranks failed (a rank died, or hung past {} s): "
          "{}",
          what, size(), timeout_.count() / 1000, error.what()));
    }
  }
  uint32_t nextTag() { return tag_++; }

  std::shared_ptr<gloo::Context> context_;
  std::chrono::milliseconds timeout_;
  std::vector<float> gathered_;
  uint32_t tag_ = 0;
};

} // namespace

io::Expected<std::unique_ptr<Communicator>>
tetra::distributed::createGlooCommunicator(const RankInfo &info,
                                           TcpStore &store,
                                           std::chrono::milliseconds timeout) {
  try {
    // Ranks of one machine (a loopback MASTER_ADDR) talk over loopback;
    // others announce this host's name to their peers.
    gloo::transport::tcp::attr attr;
    if (info.masterAddr == "127.0.0.1" || info.masterAddr == "localhost") {
      attr.hostname = "127.0.0.1";
    } else {
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      attr.hostname = host;
    }
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context =
        std::make_shared<gloo::rendezvous::Context>(info.rank, info.worldSize);
    context->setTimeout(timeout);
    StoreAdapter adapter(store);
    gloo::rendezvous::PrefixStore prefixed("gloo", adapter);
    context->connectFullMesh(prefixed, device);
    return std::unique_ptr<Communicator>(
        new GlooCommunicator(std::move(context), timeout));
  } catch (const std::exception &error) {
    return io::Error(fmt::format("rank {} of {}: cannot connect the ranks "
                                 "through gloo: {}",
                                 info.rank, info.worldSize, error.what()));
  }
}
