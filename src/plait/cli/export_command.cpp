// `plait export hf`: a checkpoint as a Hugging Face model directory (runtime/hf_export.h,
// docs/checkpoints.md "Hugging Face").
#include <cstdio>
#include <memory>
#include <string>

#include "plait/cli/commands.h"
#include "plait/cli/gpt2_vocab_dir.h"
#include "plait/core/error.h"
#include "plait/runtime/hf_export.h"
#include "plait/spec/hf_model_config.h"
#include "plait/runtime/training_resume.h"

namespace plait::cli {
namespace {

struct ExportArgs {
  std::string checkpoint, out, dtype = "fp32";
  std::string vocab_dir = default_gpt2_vocab_dir();
};

checkpoint::StoredType stored_type(const std::string& dtype) {
  if (dtype == "bf16") return checkpoint::StoredType::bf16;
  if (dtype == "fp16") return checkpoint::StoredType::f16;
  return checkpoint::StoredType::f32;
}

void run_export(const ExportArgs& args) {
  // A step directory, or a root's newest checkpoint that verifies (as --resume chooses).
  runtime::ResumePoint point = runtime::find_resume_point(args.checkpoint);
  if (!point.reader) {
    throw InputError(args.checkpoint, "(checkpoint)", "no complete checkpoint to export");
  }
  for (const auto& s : point.skipped) {
    std::fprintf(stderr, "plait: warning: skipped %s, which does not verify: %s\n", s.dir.c_str(), s.why.c_str());
  }
  runtime::HfExportOptions options;
  options.dtype = stored_type(args.dtype);
  options.gpt2_vocab_dir = args.vocab_dir;
  const runtime::HfExportResult r = runtime::export_hf(*point.reader, args.out, options);
  std::printf("plait export hf: %s (step %lld) -> %s\n", point.reader->dir().c_str(),
              static_cast<long long>(point.reader->manifest().step), args.out.c_str());
  std::printf("  model: %s as %s (%s)\n", spec::describe(r.model).c_str(), spec::hf_architecture(r.model.family),
              runtime::torch_dtype_name(options.dtype));
  std::printf("  weights: %zu tensors, %.2f MiB in model.safetensors\n", r.tensors,
              static_cast<double>(r.weight_bytes) / (1 << 20));
  std::printf("  tokenizer: %s\n", r.tokenizer == "gpt2" ? "GPT-2 BPE (vocab.json, merges.txt)"
                                                        : "byte-level (tokenizer.json: one token per byte)");
  std::string files;
  for (const std::string& f : r.files) files += (files.empty() ? "" : ", ") + f;
  std::printf("  files: %s\n", files.c_str());
}

void register_export(CLI::App& app) {
  CLI::App* group = command_group(app, "export", "Write a checkpoint in another format (export hf: Hugging Face)");
  CLI::App* cmd = group->add_subcommand(
      "hf",
      "Write a checkpoint as a Hugging Face model directory that transformers' from_pretrained\n"
      "loads (LlamaForCausalLM or GPT2LMHeadModel): config.json, model.safetensors (the\n"
      "parameters under Hugging Face's names; GPT-2's Conv1D weights transposed as it stores\n"
      "them) and the tokenizer the run's data used. docs/checkpoints.md, \"Hugging Face\"");
  auto args = std::make_shared<ExportArgs>();
  cmd->add_option("--checkpoint", args->checkpoint,
                  "A step directory (step_00000100), or a checkpoint root: its newest complete\n"
                  "checkpoint that verifies")
      ->required()
      ->type_name("DIR");
  cmd->add_option("--out", args->out, "The directory to write (new, or empty)")->required()->type_name("DIR");
  cmd->add_option("--dtype", args->dtype,
                  "How model.safetensors stores the weights: fp32 (exact), bf16 or fp16 (rounded to\n"
                  "nearest even; a value beyond fp16's range is an error)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str()
      ->type_name("fp32|bf16|fp16");
  cmd->add_option("--vocab-dir", args->vocab_dir,
                  "Runs with GPT-2's tokenizer: the directory with encoder.json and vocab.bpe\n"
                  "(default $PLAIT_GPT2_DIR or ~/.cache/plait/gpt2)")
      ->type_name("DIR");
  cmd->callback([args] { run_export(*args); });
}

const CommandRegistration kRegistration(50, register_export);

}  // namespace
}  // namespace plait::cli
