#include "plait/runtime/train_config.h"

#include <algorithm>
#include <string>

#include "plait/core/json_fields.h"
#include "plait/core/printable_text.h"
#include "plait/data/byte_tokenizer.h"
#include "plait/model/engine_limits.h"
#include "plait/runtime/hf_import.h"
#include "plait/spec/model_spec_json.h"

namespace plait::runtime {
namespace {

TrainConfig parse_train(const JsonFields& t, const spec::ModelSpec& model) {
  TrainConfig c;
  c.steps = static_cast<int>(t.integer_in("steps", 1, 1 << 30));
  c.seq = static_cast<int>(t.integer_in("seq", 1, 1 << 20));
  if (c.seq > model.max_seq) {
    t.fail("seq", "sequence length " + std::to_string(c.seq) + " exceeds model.max_seq " +
                      std::to_string(model.max_seq));
  }
  c.microbatch_size = static_cast<int>(t.integer_in("microbatch_size", 1, 1 << 16));
  c.microbatches = static_cast<int>(t.integer_in("microbatches", 1, 1 << 16, 1));
  c.lr = t.number("lr", c.lr);
  if (!(c.lr > 0)) t.fail("lr", "expected a learning rate > 0, found " + std::to_string(c.lr));
  c.min_lr = t.number("min_lr", c.lr / 10);
  if (!(c.min_lr >= 0 && c.min_lr <= c.lr)) {
    t.fail("min_lr", "expected 0 <= min_lr <= lr (" + std::to_string(c.lr) + "), found " +
                         std::to_string(c.min_lr));
  }
  c.warmup_steps = static_cast<int>(t.integer_in("warmup_steps", 0, c.steps, 0));
  c.weight_decay = t.number("weight_decay", c.weight_decay);
  if (!(c.weight_decay >= 0)) t.fail("weight_decay", "expected a value >= 0");
  c.beta1 = t.number("beta1", c.beta1);
  if (!(c.beta1 >= 0 && c.beta1 < 1)) t.fail("beta1", "expected a value in [0, 1)");
  c.beta2 = t.number("beta2", c.beta2);
  if (!(c.beta2 >= 0 && c.beta2 < 1)) t.fail("beta2", "expected a value in [0, 1)");
  c.eps = t.number("eps", c.eps);
  if (!(c.eps > 0)) t.fail("eps", "expected a value > 0");
  c.grad_clip = t.number("grad_clip", c.grad_clip);
  if (!(c.grad_clip >= 0)) t.fail("grad_clip", "expected a value >= 0 (0 disables clipping)");
  c.seed = static_cast<std::uint64_t>(t.integer_in("seed", 0, INT64_MAX, 1234));
  c.segments = spec::read_segment_request(t, c.seq);
  c.eval_every = static_cast<int>(t.integer_in("eval_every", 0, 1 << 30, 0));
  c.eval_batches = static_cast<int>(t.integer_in("eval_batches", 1, 1 << 20, 1));
  c.sample_every = static_cast<int>(t.integer_in("sample_every", 0, 1 << 30, 0));
  c.sample_tokens = static_cast<int>(t.integer_in("sample_tokens", 1, 1 << 20, std::min<std::int64_t>(64, model.max_seq - 1)));
  if (c.sample_every > 0 && c.sample_tokens + 1 > model.max_seq) {
    t.fail("sample_tokens", "a sample is its first token and " + std::to_string(c.sample_tokens) +
                                " new ones, more than model.max_seq " + std::to_string(model.max_seq));
  }
  const std::string policy = t.string("on_nonfinite", "abort");
  if (policy == "abort") {
    c.on_nonfinite = TrainConfig::OnNonFinite::kAbort;
  } else if (policy == "skip") {
    c.on_nonfinite = TrainConfig::OnNonFinite::kSkip;
  } else {
    t.fail("on_nonfinite", "expected \"abort\" or \"skip\", found \"" + policy + "\"");
  }
  c.stall_timeout_s = t.number("stall_timeout_s", c.stall_timeout_s);
  if (!(c.stall_timeout_s == 0 || (c.stall_timeout_s >= 0.1 && c.stall_timeout_s <= 1e6))) {
    t.fail("stall_timeout_s", "expected 0 (no watchdog) or seconds in [0.1, 1e6], found " +
                                  std::to_string(c.stall_timeout_s));
  }
  const std::string precision = t.string("precision", "fp32");
  if (precision == "fp32") {
    c.precision = spec::Precision::fp32;
  } else if (precision == "bf16" || precision == "mixed16") {
    c.precision = spec::Precision::bf16;
  } else if (precision == "fp16" || precision == "float16") {
    t.fail("precision", "fp16 mixed precision needs loss scaling, which plait does not do; use "
                        "\"bf16\" (same memory, fp32's exponent range, no loss scaling)");
  } else {
    t.fail("precision", "expected \"fp32\" or \"bf16\" (\"mixed16\"), found \"" + precision + "\"");
  }
  const std::string grad_reduce = t.string("grad_reduce", "fp32");
  if (grad_reduce == "fp32") {
    c.grad_reduce = spec::GradReduce::fp32;
  } else if (grad_reduce == "bf16") {
    c.grad_reduce = spec::GradReduce::bf16;
  } else {
    t.fail("grad_reduce", "expected \"fp32\" or \"bf16\", found \"" + grad_reduce + "\"");
  }
  if (const std::string why = grad_reduce_mismatch(c); !why.empty()) t.fail("grad_reduce", why);
  t.check_no_unknown_fields();
  return c;
}

DataConfig parse_data(const JsonFields& d) {
  DataConfig c;
  if (d.has("paths") && d.has("shards")) {
    d.fail("shards", "give either text files (paths) or token shards (shards), not both");
  }
  if (d.has("paths")) {
    c.paths = d.strings("paths");
    if (c.paths.empty()) d.fail("paths", "expected at least one file or directory");
  }
  if (d.has("shards")) {
    c.shards = d.string("shards");
    if (c.shards.empty()) d.fail("shards", "expected a directory of token shards (plait data prepare)");
    c.paths.clear();
    if (!d.has("tokenizer")) {
      d.fail("tokenizer", "required with shards: \"byte\" or \"gpt2\", the tokenizer the shards "
                          "were prepared with");
    }
  }
  if (d.has("val_paths")) {
    if (c.uses_shards()) {
      d.fail("val_paths", "applies to text paths; with shards the validation split is the "
                          "directory's *_val_* shards");
    }
    c.val_paths = d.strings("val_paths");
    if (c.val_paths.empty()) d.fail("val_paths", "expected at least one file or directory");
  }
  c.tokenizer = d.string("tokenizer", c.tokenizer);
  if (c.tokenizer != "byte" && c.tokenizer != "gpt2") {
    d.fail("tokenizer", "expected \"byte\" or \"gpt2\", found \"" + c.tokenizer + "\"");
  }
  if (!c.uses_shards() && c.tokenizer != "byte") {
    d.fail("tokenizer", "text paths are tokenized byte by byte; for GPT-2 tokens prepare shards "
                        "(plait data prepare --tokenizer gpt2) and give data.shards");
  }
  c.packing = d.string("packing", c.packing);
  if (c.packing != "stream" && c.packing != "documents") {
    d.fail("packing", "expected \"stream\" or \"documents\", found \"" + printable_text(c.packing, 40) + "\"");
  }
  c.balance = d.string("balance", c.balance);
  if (c.balance != "none" && c.balance != "wlb") {
    d.fail("balance", "expected \"none\" or \"wlb\", found \"" + printable_text(c.balance, 40) + "\"");
  }
  if (c.balances() && !c.packs_documents()) {
    d.fail("balance", "\"wlb\" reorders sequences packed from documents; it needs data.packing \"documents\"");
  }
  c.balance_window = static_cast<int>(d.integer_in("balance_window", 1, 1 << 20, c.balance_window));
  if (c.packs_documents() && !c.uses_shards()) {
    d.fail("packing", "\"documents\" packs the documents of token shards (plait data prepare records them); "
                      "give data.shards, or use \"stream\"");
  }
  d.check_no_unknown_fields();
  return c;
}

CheckpointConfig parse_checkpoint(const JsonFields& k) {
  CheckpointConfig c;
  c.dir = k.string("dir");
  if (c.dir.empty()) k.fail("dir", "expected the directory checkpoints are written into");
  c.every = static_cast<int>(k.integer_in("every", 0, 1 << 30, 0));
  c.keep_last = static_cast<int>(k.integer_in("keep_last", 0, 1 << 20, 0));
  c.save_initial = k.boolean("save_initial", false);
  c.on_signal = k.boolean("on_signal", true);
  k.check_no_unknown_fields();
  return c;
}

StragglerConfig parse_stragglers(const JsonFields& s) {
  StragglerConfig c;
  c.enabled = s.boolean("enabled", c.enabled);
  c.window = static_cast<int>(s.integer_in("window", 1, 1 << 16, c.window));
  c.threshold = s.number("threshold", c.threshold);
  if (!(c.threshold > 1)) s.fail("threshold", "expected a slowdown factor above 1 (e.g. 1.5)");
  c.clear_below = s.number("clear_below", 1 + (c.threshold - 1) / 2);
  if (!(c.clear_below >= 1 && c.clear_below <= c.threshold)) {
    s.fail("clear_below", "expected a factor in [1, threshold] (" + std::to_string(c.threshold) + ")");
  }
  c.consecutive = static_cast<int>(s.integer_in("consecutive", 1, 1 << 16, c.consecutive));
  c.cooldown = static_cast<int>(s.integer_in("cooldown", 0, 1 << 20, c.cooldown));
  c.rebalance = s.boolean("rebalance", c.rebalance);
  c.move_layers = s.boolean("move_layers", c.move_layers);
  c.move_horizon = static_cast<int>(s.integer_in("move_horizon", 0, 1 << 30, c.move_horizon));
  s.check_no_unknown_fields();
  return c;
}

InitConfig parse_init(const JsonFields& i) {
  InitConfig c;
  const std::string from = i.string("from");
  if (!from.starts_with("hf:") || from.size() == 3) {
    i.fail("from", "expected \"hf:DIR\", a Hugging Face model directory (config.json and model.safetensors), found \"" +
                       from + "\"");
  }
  c.hf_dir = from.substr(3);
  i.check_no_unknown_fields();
  return c;
}

}  // namespace

int DataConfig::vocab_size() const {
  return tokenizer == "gpt2" ? kGpt2VocabSize : data::ByteTokenizer::kVocabSize;
}

const char* to_string(TrainConfig::OnNonFinite policy) {
  return policy == TrainConfig::OnNonFinite::kSkip ? "skip" : "abort";
}

std::string grad_reduce_mismatch(const TrainConfig& train) {
  if (train.grad_reduce == spec::GradReduce::bf16 && train.precision != spec::Precision::bf16) {
    return "\"bf16\" rounds gradients for the wire, which needs train.precision \"bf16\" (found \"" +
           std::string(spec::precision_name(train.precision)) + "\"); use \"fp32\"";
  }
  return "";
}

spec::SequencePartition RunConfig::partition() const {
  return spec::cut_sequence(model, train.seq, train.segments);
}

RunConfig parse_run_config(const nlohmann::json& document, const std::string& file) {
  const JsonFields top(document, file);
  RunConfig c;
  c.source = file;
  if (top.has("init")) c.init = parse_init(top.object("init"));
  if (c.init && !top.has("model")) {
    c.model = read_hf_model(c.init->hf_dir);  // the Hugging Face model's own config.json
  } else {
    c.model = spec::read_model_spec(top.object("model"));
    model::check_engine_limits(c.model, file);
  }
  if (top.has("data")) c.data = parse_data(top.object("data"));
  if (c.model.vocab < c.data.vocab_size()) {
    const std::string problem =
        std::string(c.data.tokenizer == "gpt2" ? "the GPT-2 tokenizer (data.tokenizer)" : "the byte-level tokenizer") +
        " needs vocab >= " + std::to_string(c.data.vocab_size()) + ", found " + std::to_string(c.model.vocab);
    if (!top.has("model")) {
      throw InputError(c.init->hf_dir + "/config.json", "vocab_size", problem + " (init.from's model)");
    }
    top.object("model").fail("vocab", problem);
  }
  c.train = parse_train(top.object("train"), c.model);
  if (c.train.eval_every > 0 && !c.data.uses_shards() && c.data.val_paths.empty()) {
    top.object("train").fail("eval_every",
                             "validation needs held-out data: data.val_paths (text) or data.shards "
                             "(its *_val_* shards)");
  }
  if (top.has("checkpoint")) c.checkpoint = parse_checkpoint(top.object("checkpoint"));
  if (top.has("stragglers")) c.stragglers = parse_stragglers(top.object("stragglers"));
  top.check_no_unknown_fields();
  return c;
}

RunConfig load_run_config(const std::string& path) {
  return parse_run_config(read_json_file(path), path);
}

RunConfig default_run_config() {
  RunConfig c;
  c.source = "built-in default";
  c.model = spec::gpt2_model(4, 128, 4, 256, 128);
  TrainConfig& t = c.train;
  t.steps = 600;
  t.seq = 128;
  t.microbatch_size = 8;
  t.microbatches = 2;
  t.lr = 2e-3;
  t.min_lr = 2e-4;
  t.warmup_steps = 50;  // 20 gave two one-step loss spikes while the rate ramped up
  return c;
}

nlohmann::json to_json(const RunConfig& c) {
  const spec::SegmentRequest& r = c.train.segments;
  nlohmann::json j = {
      {"model", spec::model_spec_json(c.model)},
      {"train",
       {{"steps", c.train.steps},
        {"seq", c.train.seq},
        {"microbatch_size", c.train.microbatch_size},
        {"microbatches", c.train.microbatches},
        {"lr", c.train.lr},
        {"min_lr", c.train.min_lr},
        {"warmup_steps", c.train.warmup_steps},
        {"weight_decay", c.train.weight_decay},
        {"beta1", c.train.beta1},
        {"beta2", c.train.beta2},
        {"eps", c.train.eps},
        {"grad_clip", c.train.grad_clip},
        {"seed", c.train.seed},
        {"segments", r.explicit_lengths() ? nlohmann::json(r.lengths) : nlohmann::json(r.count)},
        {"eval_every", c.train.eval_every},
        {"eval_batches", c.train.eval_batches},
        {"sample_every", c.train.sample_every},
        {"sample_tokens", c.train.sample_tokens},
        {"on_nonfinite", to_string(c.train.on_nonfinite)},
        {"stall_timeout_s", c.train.stall_timeout_s},
        {"precision", std::string(spec::precision_name(c.train.precision))},
        {"grad_reduce", spec::grad_reduce_name(c.train.grad_reduce)}}},
  };
  nlohmann::json& data = j["data"];
  if (c.data.uses_shards()) {
    data["shards"] = c.data.shards;
  } else {
    data["paths"] = c.data.paths;
    if (!c.data.val_paths.empty()) data["val_paths"] = c.data.val_paths;
  }
  data["tokenizer"] = c.data.tokenizer;
  if (c.data.packs_documents()) data["packing"] = c.data.packing;
  if (c.data.balances()) {
    data["balance"] = c.data.balance;
    data["balance_window"] = c.data.balance_window;
  }
  if (c.init) j["init"] = {{"from", "hf:" + c.init->hf_dir}};
  if (c.checkpoint) {
    j["checkpoint"] = {{"dir", c.checkpoint->dir},
                       {"every", c.checkpoint->every},
                       {"keep_last", c.checkpoint->keep_last},
                       {"save_initial", c.checkpoint->save_initial},
                       {"on_signal", c.checkpoint->on_signal}};
  }
  if (c.stragglers) {
    const StragglerConfig& s = *c.stragglers;
    j["stragglers"] = {{"enabled", s.enabled},     {"window", s.window},           {"threshold", s.threshold},
                       {"clear_below", s.clear_below}, {"consecutive", s.consecutive}, {"cooldown", s.cooldown},
                       {"rebalance", s.rebalance}, {"move_layers", s.move_layers},
                       {"move_horizon", s.move_horizon}};
  }
  return j;
}

}  // namespace plait::runtime
