//===- TcpStore.cpp - A key-value store for bootstrapping ranks -----------===//

#include "runtime/distributed/TcpStore.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace tetra;
using namespace tetra::distributed;

namespace {

using Clock = std::chrono::steady_clock;

bool sendAll(int fd, const void *data, size_t size) {
  const char *bytes = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t sent = ::send(fd, bytes, size, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR)
      continue;
    if (sent <= 0)
      return false;
    bytes += sent;
    size -= static_cast<size_t>(sent);
  }
  return true;
}

bool receiveAll(int fd, void *data, size_t size) {
  char *bytes = static_cast<char *>(data);
  while (size > 0) {
    ssize_t got = ::recv(fd, bytes, size, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return false;
    bytes += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

bool sendBlob(int fd, const std::string &bytes) {
  const uint32_t size = static_cast<uint32_t>(bytes.size());
  return sendAll(fd, &size, 4) && sendAll(fd, bytes.data(), bytes.size());
}

bool receiveBlob(int fd, std::string &bytes) {
  uint32_t size = 0;
  if (!receiveAll(fd, &size, 4) || size > (1u << 30))
    return false;
  bytes.resize(size);
  return receiveAll(fd, bytes.data(), size);
}

} // namespace

/// Rank 0's server: a thread accepting connections, a thread per client.
/// It outlives rank 0's own use: going away, it waits (up to the timeout)
/// for the other ranks to hang up, so that a rank still reading what rank
/// 0 wrote last (NCCL's host sums of the last step) gets its answer.
class tetra::distributed::TcpStoreServer {
public:
  TcpStoreServer(int listener, std::chrono::milliseconds timeout)
      : listener_(listener), timeout_(timeout) {
    acceptor_ = std::thread([this] { acceptLoop(); });
  }
  ~TcpStoreServer() {
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    acceptor_.join();
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, timeout_, [&] { return serving_ == 0; });
    stopping_ = true;
    changed_.notify_all();
    for (int fd : clients_)
      ::shutdown(fd, SHUT_RDWR);
    changed_.wait(lock, [&] { return serving_ == 0; });
    lock.unlock();
    for (std::thread &t : handlers_)
      t.join();
  }

private:
  void acceptLoop() {
    while (true) {
      int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) {
        if (errno == EINTR)
          continue;
        return; // closed
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::lock_guard<std::mutex> lock(mutex_);
      clients_.push_back(fd);
      ++serving_;
      handlers_.emplace_back([this, fd] { serve(fd); });
    }
  }

  void serve(int fd) {
    while (true) {
      char op = 0;
      std::string key, value;
      if (!receiveAll(fd, &op, 1) || !receiveBlob(fd, key) ||
          !receiveBlob(fd, value))
        break;
      char status = 0;
      std::string reply;
      std::unique_lock<std::mutex> lock(mutex_);
      if (op == 'S') {
        values_[key] = value;
        changed_.notify_all();
      } else if (op == 'G') {
        bool present = changed_.wait_for(lock, timeout_, [&] {
          return stopping_ || values_.count(key) > 0;
        });
        if (present && values_.count(key))
          reply = values_[key];
        else
          status = 1;
      } else if (op == 'A') {
        int64_t delta = 0;
        std::memcpy(&delta, value.data(),
                    std::min(value.size(), sizeof delta));
        int64_t &counter = counters_[key];
        counter += delta;
        reply.assign(reinterpret_cast<const char *>(&counter), sizeof counter);
        changed_.notify_all();
      } else {
        break;
      }
      lock.unlock();
      if (!sendAll(fd, &status, 1) || !sendBlob(fd, reply))
        break;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ::close(fd);
    clients_.erase(std::find(clients_.begin(), clients_.end(), fd));
    --serving_;
    changed_.notify_all();
  }

  int listener_;
  std::chrono::milliseconds timeout_;
  std::thread acceptor_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  int serving_ = 0; ///< Clients connected.
  std::map<std::string, std::string> values_;
  std::map<std::string, int64_t> counters_;
  std::vector<int> clients_;
  std::vector<std::thread> handlers_;
};

io::Expected<std::unique_ptr<TcpStore>>
TcpStore::connect(const std::string &host, int port, bool serve,
                  std::chrono::milliseconds timeout) {
  std::unique_ptr<TcpStore> store(new TcpStore());
  store->timeout_ = timeout;
  if (serve) {
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (listener < 0 ||
        ::bind(listener, reinterpret_cast<sockaddr *>(&address),
               sizeof address) != 0 ||
        ::listen(listener, 128) != 0) {
      std::string reason = std::strerror(errno);
      if (listener >= 0)
        ::close(listener);
      return io::Error(fmt::format(
          "rank 0 cannot serve the rendezvous store on port {}: {}", port,
          reason));
    }
    store->server_ = std::make_unique<TcpStoreServer>(listener, timeout);
  }
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (int failed = ::getaddrinfo(host.c_str(), fmt::format("{}", port).c_str(),
                                 &hints, &found);
      failed != 0)
    return io::Error(fmt::format("cannot resolve MASTER_ADDR '{}': {}", host,
                                 gai_strerror(failed)));
  const Clock::time_point deadline = Clock::now() + timeout;
  std::string lastError;
  while (true) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      store->socket_ = fd;
      break;
    }
    lastError = std::strerror(errno);
    if (fd >= 0)
      ::close(fd);
    if (Clock::now() >= deadline) {
      ::freeaddrinfo(found);
      return io::Error(fmt::format(
          "cannot reach rank 0's rendezvous store at {}:{} within {} s: {}",
          host, port, timeout.count() / 1000, lastError));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::freeaddrinfo(found);
  return store;
}

TcpStore::~TcpStore() {
  if (socket_ >= 0)
    ::close(socket_);
}

io::Expected<std::vector<char>>
TcpStore::request(char op, const std::string &key,
                  const std::vector<char> &value) {
  std::string payload(value.begin(), value.end());
  char status = 0;
  std::string reply;
  if (!sendAll(socket_, &op, 1) || !sendBlob(socket_, key) ||
      !sendBlob(socket_, payload) || !receiveAll(socket_, &status, 1) ||
      !receiveBlob(socket_, reply))
    return io::Error(fmt::format(
        "the rendezvous store (rank 0) hung up during '{}': rank 0 stopped",
        key));
  if (status != 0)
    return io::Error(fmt::format(
        "waited {} s for '{}' in the rendezvous store: a rank did not "
        "arrive",
        timeout_.count() / 1000, key));
  return std::vector<char>(reply.begin(), reply.end());
}

io::Status TcpStore::set(const std::string &key,
                         const std::vector<char> &value) {
  io::Expected<std::vector<char>> done = request('S', key, value);
  if (!done)
    return done.error();
  return io::success();
}

io::Expected<std::vector<char>> TcpStore::get(const std::string &key) {
  return request('G', key, {});
}

io::Expected<int64_t> TcpStore::add(const std::string &key, int64_t delta) {
  std::vector<char> bytes(sizeof delta);
  std::memcpy(bytes.data(), &delta, sizeof delta);
  io::Expected<std::vector<char>> reply = request('A', key, bytes);
  if (!reply)
    return reply.error();
  int64_t count = 0;
  std::memcpy(&count, reply->data(), std::min(reply->size(), sizeof count));
  return count;
}

io::Status TcpStore::barrier(const std::string &name, int count) {
  io::Expected<int64_t> arrived = add(name + "/arrived", 1);
  if (!arrived)
    return arrived.error();
  if (*arrived == count)
    if (io::Status s = set(name + "/done", {'1'}); !s)
      return s;
  io::Expected<std::vector<char>> done = get(name + "/done");
  if (!done)
    return done.error();
  return io::success();
}
