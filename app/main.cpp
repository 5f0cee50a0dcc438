// tttlab — the TTT Lab command line (and, with `tttlab gui`, the desktop app).
//
// Every subcommand lives in app/cli/cmd_<name>.cpp and is registered in the list below. Errors in the
// command line (unknown flags, bad values) print one line and exit with status 2.
#include <CLI/CLI.hpp>
#include <malloc.h>
#include <cstdio>
#include <exception>
#include <new>

#include "cli/commands.hpp"
#include "tttlab/io/limits.hpp"
#ifdef TTTLAB_HAVE_CUDA
#include "tttlab/device.hpp"
#include "tttlab/kernels/cuda_device.hpp"
#endif

int main(int argc, char** argv) {
  // The engine allocates and frees the same [T, D]-sized temporaries every step. glibc serves
  // blocks above 128 KiB with fresh mmaps and returns them at free, so each step paid page faults
  // for zeroed pages (7% of a training step's time in a profile). Keep them in the heap instead.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);

  CLI::App app{"TTT Lab: an interactive lab for Test-Time Training (TTT) layers.\n"
               "Run `tttlab <command> --help` for the options of a command."};
  app.set_version_flag("--version", "tttlab 0.1.0");
  app.require_subcommand(1);

#ifdef TTTLAB_HAVE_CUDA
  // The composition root: the CUDA kernels offer their devices to core's device policy.
  tttlab::device_registry().set_gpu_probe(tttlab::kernels::probe_cuda_gpus);
#endif

  // The one explicit list of subcommands, in the order `--help` lists them.
  namespace cli = tttlab::cli;
  for (void (*register_command)(CLI::App&) :
       {cli::register_verify, cli::register_probe, cli::register_states, cli::register_train,
        cli::register_eval, cli::register_generate, cli::register_bench, cli::register_export,
        cli::register_ablate, cli::register_recall, cli::register_lessons, cli::register_info, cli::register_data,
        cli::register_gui})
    register_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    // --help, --help-all and --version: CLI11 prints them and exits with status 0.
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Unknown flags, bad values, failed validation: one line, status 2.
    std::fprintf(stderr, "tttlab: %s\n", tttlab::printable(e.what()).c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    // An allocation outside the worker threads (which say which thread it was) failed: the same
    // limits, said as plainly. std::bad_alloc's own text ("std::bad_alloc") tells a user nothing.
    std::fprintf(stderr,
                 "tttlab: error: out of memory (the process is at its limit of memory: ulimit -v, "
                 "cgroup memory.max, or free memory); with many worker threads, run with fewer, "
                 "e.g. --threads 1\n");
    return 1;
  } catch (const std::exception& e) {
    // The command itself failed (unreadable file, bad checkpoint, ...): one line, status 1, with any
    // control byte a file or a path put in the message escaped.
    std::fprintf(stderr, "tttlab: error: %s\n", tttlab::printable(e.what()).c_str());
    return 1;
  }
  return tttlab::cli::exit_code();
}
