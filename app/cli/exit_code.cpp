// Process exit status shared by the subcommand callbacks (see commands.hpp).
#include "cli/commands.hpp"

namespace tttlab::cli {
namespace {
int g_exit_code = 0;
}
void set_exit_code(int code) { g_exit_code = code; }
int exit_code() { return g_exit_code; }
}  // namespace tttlab::cli
