// plait: train GPT-style models with pipeline (incl. sequence-level) and data parallelism on
// heterogeneous clusters. This file only wires the subcommands and turns errors into one line.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "plait/cli/commands.h"
#include "plait/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{
      "plait: train GPT-style language models with pipeline (Seq1F1B, zero-bubble, 1F1B, ...) and\n"
      "data parallelism across unlike devices; simulate and plan layouts before you run them."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "plait 0.1.0");
  plait::cli::register_all_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const plait::Error& e) {
    std::fprintf(stderr, "plait: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plait: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
