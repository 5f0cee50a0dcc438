// `tttlab export --checkpoint DIR --out DIR [--dtype f32|bf16]`: write a model as a self-contained
// directory (config.json + model.safetensors in the official PyTorch layout), e.g. to ship it or load it
// into ttt-lm-pytorch. The training state is left behind. --out must not be the source checkpoint, a
// training run folder or a checkpoint in one, a symbolic link, or an existing non-directory.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "cli/checkpoint_option.hpp"
#include "cli/commands.hpp"
#include "cli/validators.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/io/limits.hpp"
#include "tttlab/model/checkpoint.hpp"

namespace tttlab::cli {
namespace fs = std::filesystem;

namespace {

// A training run folder: train --resume reads `latest`, train_config.json and the step-* checkpoints.
bool is_run_folder(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  if (fs::exists(dir / "latest", ec) || fs::exists(dir / "train_config.json", ec)) return true;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind("step-", 0) == 0) return true;
  return false;
}

// Refuses an --out that would lose something: the source checkpoint itself (its f32 weights would be
// replaced, by bf16 ones with --dtype bf16), a run folder or a checkpoint inside one (train --resume
// would then read an export as a checkpoint), a symbolic link (the files would land wherever it
// points), or a path that exists and is not a directory.
void check_export_target(const fs::path& src, const fs::path& out) {
  const std::string shown = "--out '" + clip(out.string(), 240) + "'";
  std::error_code ec;
  fs::path out_real = fs::weakly_canonical(out, ec);
  if (!out_real.has_filename()) out_real = out_real.parent_path();  // "dir/"
  // The path as given (not resolved: a symbolic link must be seen as one), without a trailing "/".
  const fs::path given = out.has_filename() ? out : out.parent_path();
  const fs::file_status st = fs::symlink_status(given, ec);
  if (!fs::exists(st)) {
    if (is_run_folder(out_real.parent_path()))
      throw std::runtime_error(shown + " is inside a training run folder: exporting there would break train "
                               "--resume; choose a directory outside the run");
    return;
  }
  if (fs::is_symlink(st)) throw std::runtime_error(shown + " is a symbolic link: give a real directory");
  if (!fs::is_directory(st)) throw std::runtime_error(shown + " exists and is not a directory");
  const fs::path src_real = fs::weakly_canonical(src, ec);
  if (fs::equivalent(out, src, ec) || (!out_real.empty() && out_real == src_real))
    throw std::runtime_error(shown + " is the checkpoint being exported: writing there would replace its weights; "
                             "choose another directory");
  if (is_run_folder(out) || is_run_folder(out_real.parent_path()))
    throw std::runtime_error(shown + " is a training run folder (or a checkpoint in one): exporting there would "
                             "break train --resume; choose another directory");
}

}  // namespace

void register_export(CLI::App& app) {
  struct Args {
    std::string checkpoint, out, dtype = "f32";
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("export", "Write a checkpoint's model as config.json + model.safetensors (official PyTorch layout)");
  add_checkpoint_option(cmd, a->checkpoint)->required();
  cmd->add_option("--out", a->out, "Output directory")->check(non_empty_path())->required();
  cmd->add_option("--dtype", a->dtype, "Tensor type in the file")->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
  cmd->callback([a] {
    const fs::path src = resolve_checkpoint(a->checkpoint);
    check_export_target(src, a->out);
    auto model = load_model(a->checkpoint);
    fs::create_directories(a->out);
    write_file_atomic(fs::path(a->out) / "config.json", model->config().to_json());
    save_model_safetensors(*model, fs::path(a->out) / "model.safetensors", {{"tttlab_source", src.string()}},
                           a->dtype == "bf16");
    std::printf("exported %s (%ld parameters, %s) to %s\n", printable(src.string()).c_str(), model->num_params(),
                a->dtype.c_str(), printable(a->out).c_str());
    set_exit_code(0);
  });
}

}  // namespace tttlab::cli
