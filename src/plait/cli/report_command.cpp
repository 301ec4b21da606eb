// `plait report`: the training report of a --metrics file (runtime/training_metrics.h): a
// summary and the memory table on stdout, and with --html a self-contained page of charts
// (trace/html_report.h).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "plait/cli/commands.h"
#include "plait/cli/output_path.h"
#include "plait/runtime/training_metrics.h"
#include "plait/trace/html_report.h"

namespace plait::cli {
namespace {

struct ReportArgs {
  std::string metrics, html;
};

void run_report(const ReportArgs& args) {
  if (!args.html.empty()) prepare_output_path("--html", args.html);
  const runtime::TrainingMetrics m = runtime::read_training_metrics(args.metrics);
  const trace::Report report = runtime::training_report(m);
  std::printf("%s\n", report.title.c_str());
  for (const auto& [key, value] : report.summary) std::printf("  %s: %s\n", key.c_str(), value.c_str());
  for (const trace::ReportTable& t : report.tables) {
    std::printf("%s:\n", t.title.c_str());
    // Column widths from the longest cell.
    std::vector<std::size_t> width(t.header.size(), 0);
    const auto widen = [&](const std::vector<std::string>& row) {
      for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
    };
    widen(t.header);
    for (const auto& row : t.rows) widen(row);
    const auto print_row = [&](const std::vector<std::string>& row) {
      std::printf(" ");
      for (std::size_t i = 0; i < row.size(); ++i) {
        // The text of a prose column, its later lines under its first.
        if (i + 1 == row.size() && t.prose) {
          std::string text = row[i];
          const std::string indent = "\n" + std::string(i > 0 ? width[0] + 3 : 2, ' ');
          for (std::size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + indent.size())) {
            text.replace(at, 1, indent);
          }
          std::printf(" %s", text.c_str());
        } else {
          std::printf(i < 2 ? " %-*s" : " %*s", static_cast<int>(width[i]), row[i].c_str());
        }
      }
      std::printf("\n");
    };
    print_row(t.header);
    for (const auto& row : t.rows) print_row(row);
  }
  if (m.steps.empty()) std::printf("  (no training steps in %s)\n", args.metrics.c_str());
  if (!args.html.empty()) {
    trace::write_html_report_file(report, args.html);
    std::printf("wrote %s (loss, validation loss, learning rate, gradient norm and tokens/s over steps; memory by rank)\n",
                args.html.c_str());
  }
}

void register_report(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Summarise a training run from its --metrics file (plait train --metrics FILE): the loss,\n"
      "validation loss, tokens/s and the peak memory of every rank; with --html a self-contained\n"
      "page (SVG, no script) charting the training and validation loss, learning rate, gradient\n"
      "norm and tokens/s over steps, with the memory table and the last samples");
  auto args = std::make_shared<ReportArgs>();
  cmd->add_option("--metrics", args->metrics, "The metrics file plait train --metrics wrote")->required()->type_name("FILE");
  cmd->add_option("--html", args->html, "Write the report as an HTML page")->type_name("FILE");
  cmd->callback([args] { run_report(*args); });
}

const CommandRegistration kRegistration(60, register_report);

}  // namespace
}  // namespace plait::cli
