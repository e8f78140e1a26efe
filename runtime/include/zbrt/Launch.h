//===- Launch.h - Starting ranks through mpirun -----------------*- C++ -*-===//
//
// Part of ZeroBubble MLIR.
//
// A tool that wants P ranks runs itself again under `mpirun -np P`; the
// copies see isMPIWorker() and do the work.
//
//===----------------------------------------------------------------------===//

#ifndef ZBRT_LAUNCH_H
#define ZBRT_LAUNCH_H

#include <string>

namespace zbrt {

/// Whether this process was started by mpirun (or another MPI launcher,
/// such as Slurm's srun with PMI or PMIx): OMPI_COMM_WORLD_RANK, PMI_RANK or
/// PMIX_RANK is set.
bool isMPIWorker();

/// The number of processes the launcher started (OMPI_COMM_WORLD_SIZE,
/// PMI_SIZE, or SLURM_NTASKS under PMIx), or 0 when it does not say or this
/// is no MPI worker.
int launchedWorldSize();

/// The full path of `program` found on PATH (or `program` itself when it
/// contains a '/' and is executable), or "" when there is none.
std::string findOnPath(const std::string &program);

/// Runs this program again as `np` MPI ranks:
///   mpirun -np NP [--allow-run-as-root] --oversubscribe --bind-to none
///          /proc/self/exe ARGV[1..]
/// (--allow-run-as-root only when running as root), with this environment
/// plus OMPI_MCA_rmaps_base_oversubscribe=1, and waits for it. Returns
/// mpirun's exit status (128 + N when a signal N ended it). When mpirun
/// cannot be found or started, returns -1 and sets `error`. The flags are
/// Open MPI's.
int relaunchUnderMPI(int np, int argc, char **argv, std::string &error);

} // namespace zbrt

#endif // ZBRT_LAUNCH_H
