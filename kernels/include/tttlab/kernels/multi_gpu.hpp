// tttlab/kernels/multi_gpu.hpp — data-parallel training on several GPUs through NCCL: the GPU half
// of train/data_parallel.hpp.
//
// ONE HOST: `tttlab train --gpus N` runs one process with N CudaTrainBackend replicas (GPUs 0..N−1),
// one NCCL communicator each (ncclCommInitAll), driven by one thread each (DataParallelBackend).
//
// SEVERAL PROCESSES (several hosts, or one process per GPU): every process runs the same command;
// JobEnvironment says which process it is. Process p with n local GPUs holds global ranks
// p·n .. p·n + n − 1 of a world of P·n. The first process creates NCCL's unique id and hands it to
// the others through the rendezvous:
//   tcp:HOST:PORT   process 0 listens on HOST:PORT, waits until every other process has connected
//                   (the job's start barrier), sends each the id, and closes the port;
//   file:PATH       process 0 writes the id to PATH (atomically), the others wait for the file;
//                   process 0 removes it once NCCL has joined every rank. Use a new path per job.
// Every wait has a timeout (MultiGpuOptions::timeout_seconds), and so does every collective: a
// process that died or hangs stops the others with an error naming the rank that waited, instead of
// leaving them blocked forever.
//
// NCCL is opened at run time (dlopen of libnccl.so.2: $TTTLAB_NCCL names the file, else the loader's
// path, else the CUDA toolkit's lib64), like cuBLAS: the executable starts and trains on one GPU where
// NCCL is not installed, and says so when asked for more. NCCL_NVLS_ENABLE defaults to 0 here (NVLink
// multicast is not needed for these all-reduce sizes).
//
// Which process of a job this is comes from the launcher's environment (JobEnvironment,
// train/data_parallel.hpp).
//
// THE GROUP OUTLIVES A BACKEND. The factory creates the communicators at its first call and keeps
// them: a rollback (train/session.hpp) builds a new backend on the same group, with no new rendezvous.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tttlab/kernels/train_cuda.hpp"
#include "tttlab/train/data_parallel.hpp"

namespace tttlab::kernels {


struct MultiGpuOptions {
  int gpus = 1;                     // GPUs this process drives
  int first_device = -1;            // their first CUDA ordinal; −1: local_rank · gpus
  JobEnvironment job;               // one process unless said otherwise
  double timeout_seconds = 600;     // rendezvous, NCCL start-up and every collective
  CudaTrainOptions cuda;            // GEMM precision (device is set per replica)
  DataParallelOptions data_parallel;  // fault injection for tests (its layout is computed here)
};

// Whether NCCL can be opened; `why` gets the reason when not. The version in words ("2.28.9"), or "".
bool nccl_available(std::string* why = nullptr);
std::string nccl_version();

// The number of CUDA devices (0 without a driver).
int cuda_device_count();

// The training backend of a data-parallel job (train/data_parallel.hpp's DataParallelBackend over
// CudaTrainBackend replicas and NCCL communicators). Checks, when the Trainer calls it: NCCL present,
// enough GPUs, the model supported by the GPU step (cuda_train_unsupported), the batch at least one
// sequence per rank. Each replica is built for the largest shard. Errors are std::invalid_argument
// (settings) or std::runtime_error (devices, NCCL, rendezvous), each one line.
TrainBackendFactory multi_gpu_train_backend_factory(const MultiGpuOptions& options);

}  // namespace tttlab::kernels
