//===- TcpStore.h - A key-value store for bootstrapping ranks ---*- C++ -*-===//
//
// How the processes of a multi-rank run find each other: rank 0 serves a
// key-value store on MASTER_ADDR:MASTER_PORT (torchrun's and SLURM's
// variables), every rank — rank 0 too — is its client. The engines'
// bootstraps go through it: NCCL's unique id (rank 0 sets it, the others
// get it), Gloo's per-pair addresses (its rendezvous store).
//
// Protocol (little-endian, one request at a time per connection):
//   request  = op:u8 key-length:u32 key value-length:u32 value
//   response = status:u8 value-length:u32 value
// op 'S' sets key to value; 'G' waits until key is set (at most the store's
// timeout) and returns its value; 'A' adds the 8-byte signed value to the
// key's counter (absent: 0) and returns the sum. status 0: done, 1: the
// wait timed out.
//
//===----------------------------------------------------------------------===//

#ifndef TETRA_RUNTIME_DISTRIBUTED_TCPSTORE_H
#define TETRA_RUNTIME_DISTRIBUTED_TCPSTORE_H

#include "runtime/io/Error.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tetra::distributed {

class TcpStoreServer;

class TcpStore {
public:
  /// Rank 0 (`serve`) listens on `port` of every interface and connects to
  /// itself; the others connect to host:port, retrying until `timeout`.
  static io::Expected<std::unique_ptr<TcpStore>>
  connect(const std::string &host, int port, bool serve,
          std::chrono::milliseconds timeout);
  ~TcpStore();

  io::Status set(const std::string &key, const std::vector<char> &value);
  /// The key's value, once some rank has set it (an error after the
  /// timeout, naming the key).
  io::Expected<std::vector<char>> get(const std::string &key);
  /// Adds `delta` to the counter `key` and returns the new count.
  io::Expected<int64_t> add(const std::string &key, int64_t delta);
  /// Returns once `count` ranks have reached the barrier `name`.
  io::Status barrier(const std::string &name, int count);

  std::chrono::milliseconds timeout() const { return timeout_; }

private:
  TcpStore() = default;
  io::Expected<std::vector<char>> request(char op, const std::string &key,
                                          const std::vector<char> &value);

  int socket_ = -1;
  std::chrono::milliseconds timeout_{0};
  std::unique_ptr<TcpStoreServer> server_;
};

} // namespace tetra::distributed

#endif // TETRA_RUNTIME_DISTRIBUTED_TCPSTORE_H
