//===- Launcher.cpp - One process per rank --------------------------------===//

#include "runtime/distributed/Launcher.h"

#include <arpa/inet.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace tetra;

int tetra::distributed::freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  int port = 29500;
  if (fd >= 0 &&
      ::bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) ==
          0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length) == 0)
    port = ntohs(address.sin_port);
  if (fd >= 0)
    ::close(fd);
  return port;
}

namespace {

/// The ranks' process group, for forwarding the launcher's SIGINT and
/// SIGTERM (0: none yet).
volatile sig_atomic_t ranksGroup = 0;
volatile sig_atomic_t forwarded = 0;

void forward(int signal) {
  forwarded = signal;
  if (ranksGroup > 0)
    ::kill(-static_cast<pid_t>(ranksGroup), signal);
}

std::string describeExit(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status),
                       strsignal(WTERMSIG(status)));
  return fmt::format("exited with code {}", WEXITSTATUS(status));
}

int exitCodeOf(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

} // namespace

int tetra::distributed::launchRanks(int ranks,
                                    const std::vector<std::string> &arguments,
                                    const std::string &who,
                                    std::chrono::seconds grace) {
  const int port = freePort();
  std::vector<std::string> argv = arguments;
  // The ranks get a process group of their own, so that a terminal's
  // Ctrl-C reaches them once — through the launcher, which forwards SIGINT
  // and SIGTERM (a cluster's pre-emption) to all of them: each stops after
  // the step in progress, at the same step, with a checkpoint.
  ranksGroup = 0;
  forwarded = 0;
  struct sigaction action {};
  action.sa_handler = forward;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  std::vector<pid_t> children(static_cast<size_t>(ranks), -1);
  for (int rank = 0; rank < ranks; ++rank) {
    pid_t pid = ::fork();
    if (pid < 0) {
      fmt::print(stderr, "{}: error: cannot start rank {}: {}\n", who, rank,
                 std::strerror(errno));
      for (pid_t child : children)
        if (child > 0)
          ::kill(child, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      ::setpgid(0, ranksGroup > 0 ? static_cast<pid_t>(ranksGroup) : 0);
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::setenv("RANK", fmt::format("{}", rank).c_str(), 1);
      ::setenv("LOCAL_RANK", fmt::format("{}", rank).c_str(), 1);
      ::setenv("WORLD_SIZE", fmt::format("{}", ranks).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", fmt::format("{}", port).c_str(), 1);
      std::vector<char *> pointers;
      for (std::string &arg : argv)
        pointers.push_back(arg.data());
      pointers.push_back(nullptr);
      ::execv("/proc/self/exe", pointers.data());
      fmt::print(stderr, "{}: error: cannot run rank {}: {}\n", who, rank,
                 std::strerror(errno));
      ::_exit(127);
    }
    ::setpgid(pid, ranksGroup > 0 ? static_cast<pid_t>(ranksGroup) : pid);
    if (ranksGroup == 0)
      ranksGroup = pid;
    children[static_cast<size_t>(rank)] = pid;
  }

  int result = 0, running = ranks;
  std::chrono::steady_clock::time_point deadline;
  bool stopping = false, terminated = false;
  while (running > 0) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, stopping ? WNOHANG : 0);
    if (pid < 0 && errno == EINTR)
      continue;
    if (pid < 0)
      break;
    if (pid == 0) { // stopping: someone is still running
      if (std::chrono::steady_clock::now() >= deadline) {
        for (pid_t child : children)
          if (child > 0)
            ::kill(child, terminated ? SIGKILL : SIGTERM);
        deadline = std::chrono::steady_clock::now() + grace;
        terminated = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    int rank = 0;
    while (rank < ranks && children[static_cast<size_t>(rank)] != pid)
      ++rank;
    if (rank == ranks)
      continue;
    children[static_cast<size_t>(rank)] = -1;
    --running;
    const bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    if (failed && forwarded && !stopping) {
      // Stopped as asked: each rank finishes its step and checkpoint (no
      // deadline), and exits as its signal says.
      if (result == 0)
        result = exitCodeOf(status);
    } else if (failed && !stopping) {
      fmt::print(stderr,
                 "{}: error: rank {} of {} (pid {}) {}; stopping the other "
                 "ranks\n",
                 who, rank, ranks, pid, describeExit(status));
      result = exitCodeOf(status);
      stopping = true;
      deadline = std::chrono::steady_clock::now() + grace;
    }
  }
  return result;
}

io::Expected<std::string> tetra::distributed::enterRank(const RankInfo &info) {
  if (info.rank != 0 && !std::freopen("/dev/null", "w", stdout))
    return io::Error(fmt::format("rank {}: cannot silence its output",
                                 info.rank));
  return info.worldSize > 1 ? fmt::format("rank {}: ", info.rank)
                            : std::string();
}
