// The subcommands of tttlab. Each register_* adds one subcommand to the CLI11 app; its callback runs
// the command and stores the process exit status with set_exit_code() (0 ok, 1 the command failed,
// 2 bad usage).
#pragma once

namespace CLI {
class App;
}

namespace tttlab::cli {

void register_verify(CLI::App& app);  // cmd_verify.cpp: the equivalence suite
void register_probe(CLI::App& app);   // cmd_probe.cpp: one layer's inner loop, token by token
void register_states(CLI::App& app);  // cmd_states.cpp: hidden states along a text, to safetensors
void register_train(CLI::App& app);     // cmd_train.cpp
void register_eval(CLI::App& app);      // cmd_eval.cpp
void register_generate(CLI::App& app);  // cmd_generate.cpp
void register_bench(CLI::App& app);     // cmd_bench.cpp
void register_export(CLI::App& app);    // cmd_export.cpp
void register_ablate(CLI::App& app);    // cmd_ablate.cpp
void register_info(CLI::App& app);    // cmd_info.cpp: build configuration and compute devices
void register_data(CLI::App& app);    // cmd_data.cpp: prepare-brown, stats
void register_recall(CLI::App& app);   // cmd_recall.cpp: the recall lab's table
void register_lessons(CLI::App& app);  // cmd_lessons.cpp: the course: list, check
void register_gui(CLI::App& app);     // app/gui/command.cpp: the desktop app, screenshots, frame benchmark

void set_exit_code(int code);
int exit_code();

}  // namespace tttlab::cli
