//===- RunFiles.cpp - Where runs' metrics are ------------------------------===//

#include "tools/tetra/RunFiles.h"

#include <algorithm>
#include <dirent.h>
#include <sys/stat.h>

using namespace tetra;

namespace {

bool isDirectory(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}
bool isFile(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

} // namespace

io::Expected<std::vector<std::string>>
tetra::driver::metricsFiles(const std::string &run) {
  if (!isDirectory(run)) {
    if (!isFile(run))
      return io::Error("cannot read '" + run + "'");
    return std::vector<std::string>{run};
  }
  if (isFile(run + "/metrics.jsonl"))
    return std::vector<std::string>{run + "/metrics.jsonl"};
  std::vector<std::string> found;
  if (DIR *dir = opendir(run.c_str())) {
    while (dirent *entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name != "." && name != ".." &&
          isFile(run + "/" + name + "/metrics.jsonl"))
        found.push_back(run + "/" + name + "/metrics.jsonl");
    }
    closedir(dir);
  }
  std::sort(found.begin(), found.end());
  if (found.empty())
    return io::Error("'" + run +
                     "' holds no metrics.jsonl, nor do its folders");
  return found;
}

std::string tetra::driver::policyOf(const std::string &runName) {
  const size_t at = runName.rfind("/seed=");
  return at == std::string::npos ? runName : runName.substr(0, at);
}
