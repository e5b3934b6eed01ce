// `kiln`: the program's entry point. The subcommands are the classes in cli/ (cli/command_line.h).
#include "cli/command_line.h"
#include "cli/process_setup.h"

int main(int argc, char** argv) {
  kiln::cli::raise_open_file_limit();
  kiln::cli::CommandLine cli;
  if (auto done = cli.parse(argc, argv)) return *done;
  return cli.run();
}
