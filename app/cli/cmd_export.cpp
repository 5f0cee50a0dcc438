// `tttlab export --checkpoint DIR --out DIR [--dtype f32|bf16]`: write a model as a self-contained
// directory (config.json + model.safetensors in the official PyTorch layout), e.g. to ship it or load it
// into ttt-lm-pytorch. The training state is left behind.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "cli/commands.hpp"
#include "tttlab/io/atomic_file.hpp"
#include "tttlab/model/checkpoint.hpp"
#include "tttlab/train/trainer.hpp"

namespace tttlab::cli {
namespace fs = std::filesystem;

void register_export(CLI::App& app) {
  struct Args {
    std::string checkpoint, out, dtype = "f32";
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("export", "Write a checkpoint's model as config.json + model.safetensors (official PyTorch layout)");
  cmd->add_option("--checkpoint", a->checkpoint, "A run directory or a checkpoint directory")->required();
  cmd->add_option("--out", a->out, "Output directory")->required();
  cmd->add_option("--dtype", a->dtype, "Tensor type in the file")->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
  cmd->callback([a] {
    auto model = load_model(a->checkpoint);
    const fs::path src = resolve_checkpoint(a->checkpoint);
    fs::create_directories(a->out);
    write_file_atomic(fs::path(a->out) / "config.json", model->config().to_json());
    save_model_safetensors(*model, fs::path(a->out) / "model.safetensors", {{"tttlab_source", src.string()}},
                           a->dtype == "bf16");
    std::printf("exported %s (%ld parameters, %s) to %s\n", src.string().c_str(), model->num_params(),
                a->dtype.c_str(), a->out.c_str());
    set_exit_code(0);
  });
}

}  // namespace tttlab::cli
