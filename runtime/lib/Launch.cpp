//===- Launch.cpp - Starting ranks through mpirun -------------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zbrt/Launch.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace zbrt;

bool zbrt::isMPIWorker() {
  for (const char *name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    const char *value = std::getenv(name);
    if (value && *value)
      return true;
  }
  return false;
}

int zbrt::launchedWorldSize() {
  if (!isMPIWorker())
    return 0;
  for (const char *name :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
    const char *value = std::getenv(name);
    if (!value || !*value)
      continue;
    // A count, else the launcher does not say.
    char *end = nullptr;
    errno = 0;
    long count = std::strtol(value, &end, 10);
    return errno || *end || count < 1 || count > INT32_MAX
               ? 0
               : static_cast<int>(count);
  }
  return 0;
}

std::string zbrt::findOnPath(const std::string &program) {
  if (program.empty())
    return "";
  if (program.find('/') != std::string::npos)
    return access(program.c_str(), X_OK) == 0 ? program : "";
  const char *path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos)
      end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return "";
}

/// The path of this executable, or `fallback` when /proc is not there.
static std::string selfPath(const char *fallback) {
  std::vector<char> buffer(4096);
  ssize_t length = readlink("/proc/self/exe", buffer.data(), buffer.size());
  if (length > 0 && static_cast<size_t>(length) < buffer.size())
    return std::string(buffer.data(), length);
  return fallback ? fallback : "";
}

int zbrt::relaunchUnderMPI(int np, int argc, char **argv, std::string &error) {
  if (np < 1) {
    error = "the number of ranks must be positive, got " + std::to_string(np);
    return -1;
  }
  std::string mpirun = findOnPath("mpirun");
  if (mpirun.empty()) {
    error = "cannot find 'mpirun' on PATH, which running " +
            std::to_string(np) +
            " ranks needs (install Open MPI, e.g. the openmpi-bin package)";
    return -1;
  }

  std::vector<std::string> args = {mpirun, "-np", std::to_string(np)};
  if (geteuid() == 0)
    args.push_back("--allow-run-as-root");
  args.insert(args.end(), {"--oversubscribe", "--bind-to", "none"});
  args.push_back(selfPath(argc > 0 ? argv[0] : nullptr));
  for (int i = 1; i < argc; ++i)
    args.push_back(argv[i]);
  std::vector<char *> execArgs;
  for (std::string &arg : args)
    execArgs.push_back(arg.data());
  execArgs.push_back(nullptr);

  pid_t child = fork();
  if (child < 0) {
    error = std::string("cannot start mpirun: ") + std::strerror(errno);
    return -1;
  }
  if (child == 0) {
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    execv(execArgs[0], execArgs.data());
    // Only reached when exec failed; the parent reports the status.
    _exit(127);
  }

  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      error = std::string("cannot wait for mpirun: ") + std::strerror(errno);
      return -1;
    }
  }
  if (WIFEXITED(status)) {
    if (WEXITSTATUS(status) == 127) {
      // Either exec failed or mpirun itself said 127; say what ran.
      error = "'" + mpirun + "' exited with status 127 (could it be run?)";
    }
    return WEXITSTATUS(status);
  }
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}
