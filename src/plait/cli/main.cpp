// plait: train GPT-style models with pipeline (incl. sequence-level) and data parallelism on
// heterogeneous clusters. This file only wires the subcommands and turns errors into one line.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <new>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "plait/cli/commands.h"
#include "plait/core/error.h"
#include "plait/core/printable_text.h"

namespace {

// `plait bogus`, `plait data bogus`: CLI11 would say "A subcommand is required"; say which word
// is not a command and what the commands are. Returns the error, or "" when argv is fine so far.
std::string unknown_command(const CLI::App& app, int argc, char** argv) {
  const CLI::App* group = &app;
  for (int i = 1; i < argc && group->get_require_subcommand_min() > 0; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') return "";  // --help, --version: CLI11's
    const CLI::App* next = nullptr;
    std::string names;
    for (const CLI::App* sub : group->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name() == word) next = sub;
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (next == nullptr) {
      const std::string where = group == &app ? std::string("plait") : "plait " + group->get_name();
      return "unknown command '" + plait::printable_text(word, 40) + "' for " + where + "; expected one of: " + names +
             " (" + where + " --help)";
    }
    group = next;
  }
  return "";
}

// A process that an MPI launcher started as rank r > 0 and that fails before MPI runs (a bad
// flag or config: the same argv and files as rank 0) lets rank 0 say it: mpirun ends the job
// when rank 0 exits non-zero, so this one is usually killed during the wait and the error shows
// once. If it is still alive after the wait (only this rank failed), it prints anyway.
void let_rank_zero_report() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* v = std::getenv(name); v != nullptr && std::atoi(v) > 0) {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      return;
    }
  }
}

int fail(const std::string& message, int status) {
  let_rank_zero_report();
  std::fprintf(stderr, "plait: %s\n", message.c_str());
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "plait: train GPT-style language models with pipeline (Seq1F1B, zero-bubble, 1F1B, ...) and\n"
      "data parallelism across unlike devices; simulate and plan layouts before you run them."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "plait 0.1.0");
  plait::cli::register_all_commands(app);
  if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
    return fail("error: " + unknown, 1);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) let_rank_zero_report();
    return app.exit(e);
  } catch (const plait::cli::ExitStatus& e) {
    return e.status;
  } catch (const plait::Error& e) {
    return fail(std::string("error: ") + e.what(), 1);
  } catch (const std::filesystem::filesystem_error& e) {
    // What the file system refused, with the path (not "internal error": it is the input's).
    std::string what = e.code().message();
    if (!e.path1().empty()) what = e.path1().string() + ": " + what;
    if (!e.path2().empty()) what += " (and " + e.path2().string() + ")";
    return fail("error: " + what, 1);
  } catch (const std::bad_alloc&) {
    return fail("error: out of memory: an allocation failed (the inputs ask for more memory than this "
                "machine can give)",
                1);
  } catch (const std::exception& e) {
    return fail(std::string("internal error: ") + e.what(), 3);
  }
  return 0;
}
