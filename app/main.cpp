// tttlab — the TTT Lab command line (and, with `tttlab gui`, the desktop app).
//
// Every subcommand lives in app/cli/cmd_<name>.cpp and is registered in the list below. Errors in the
// command line (unknown flags, bad values) print one line and exit with status 2.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"TTT Lab: an interactive lab for Test-Time Training (TTT) layers.\n"
               "Run `tttlab <command> --help` for the options of a command."};
  app.set_version_flag("--version", "tttlab 0.1.0");
  app.require_subcommand(1);

  // The one explicit list of subcommands.
  tttlab::cli::register_info(app);
  tttlab::cli::register_gui(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tttlab: %s\n", e.what());
    return 2;
  }
  return tttlab::cli::exit_code();
}
