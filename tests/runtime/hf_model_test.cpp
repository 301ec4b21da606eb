// Hugging Face export and import (runtime/hf_export.h, runtime/hf_import.h): a checkpoint
// exported and read back gives identical tensors for both families, in fp32 and rounded in bf16
// and fp16; a directory written by hand in Hugging Face's layout (Conv1D transposes, names with
// and without GPT-2's "transformer." prefix, shards, fp16 and bf16 files, saved buffers) loads;
// wrong shapes, unknown and missing tensors are one-line refusals naming the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "plait/checkpoint/checkpoint_store.h"
#include "plait/checkpoint/hf_weight_files.h"
#include "plait/core/bf16.h"
#include "plait/core/error.h"
#include "plait/core/fp16.h"
#include "plait/core/memory_tracker.h"
#include "plait/model/hf_tensor_names.h"
#include "plait/model/stage_model.h"
#include "plait/runtime/hf_export.h"
#include "plait/runtime/hf_import.h"
#include "plait/runtime/train_config.h"
#include "plait/spec/hf_model_config.h"
#include "small_models.h"
#include "support/raw_safetensors.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace plait::runtime {
namespace {

using plait::test::RawTensor;
using plait::test::raw_safetensors;

namespace fs = std::filesystem;

spec::ModelSpec tiny(spec::Family family, bool tied) { return test::small_model(family, 300, 40, tied); }

// A model's initialised parameters, by plait name.
struct Parameters {
  MemoryTracker tracker;
  model::StageModel model;
  Parameters(const spec::ModelSpec& m, std::uint64_t seed) : model(m, model::StageSpec::whole_model(m), tracker) {
    model.init_parameters(seed);
  }
};

class HfModelTest : public plait::test::TempDirTest {
 protected:
  // A checkpoint of `m` holding `p`'s parameters (what export reads of one).
  std::string save(const spec::ModelSpec& m, const model::StageModel& p) {
    RunConfig run = default_run_config();
    run.model = m;
    checkpoint::CheckpointManifest manifest;
    manifest.step = 5;
    manifest.config = to_json(run);
    checkpoint::CheckpointFile file{"stage_0.safetensors", {}};
    for (const model::NamedTensor& t : p.tensors()) {
      file.tensors.push_back({t.name, t.shape, p.parameters().subspan(t.offset, t.numel)});
    }
    return checkpoint::save_checkpoint(path("ckpt"), manifest, {&file, 1});
  }

  std::string error_of(const std::string& dir) {
    try {
      HfModel hf(dir);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
};

TEST_F(HfModelTest, ExportThenImportGivesIdenticalTensorsForBothFamilies) {
  for (const spec::Family family : {spec::Family::gpt2, spec::Family::llama}) {
    for (const bool tied : {true, false}) {
      const spec::ModelSpec m = tiny(family, tied);
      Parameters p(m, 42);
      const checkpoint::CheckpointReader reader(save(m, p.model));
      const std::string out = path("hf");
      const HfExportResult r = export_hf(reader, out, {});
      EXPECT_EQ(r.model, m);
      EXPECT_EQ(r.tokenizer, "byte");
      const HfModel hf(out);
      EXPECT_EQ(hf.model(), m);
      std::vector<float> values;
      for (const model::NamedTensor& t : p.model.tensors()) {
        values.assign(t.numel, 0.0f);
        hf.read(t, values);
        EXPECT_EQ(0, std::memcmp(values.data(), p.model.parameters().data() + t.offset, t.numel * sizeof(float)))
            << spec::family_name(family) << " " << t.name;
      }
      // What transformers reads: its names, Conv1D transposed, config.json of the family.
      const nlohmann::json config = read_json_file(out + "/config.json");
      EXPECT_EQ(config.at("model_type"), std::string(spec::family_name(family)));
      EXPECT_EQ(config.at("tie_word_embeddings"), tied);
      const checkpoint::HfWeightFiles w(out);
      if (family == spec::Family::gpt2) {
        const checkpoint::SafetensorsEntry& e = w.entry("transformer.h.1.mlp.c_fc.weight");
        EXPECT_EQ(e.shape, (std::vector<std::int64_t>{32, 128}));  // (in, out)
        std::vector<float> conv(32 * 128);
        w.read("transformer.h.1.mlp.c_fc.weight", conv);
        const std::span<const float> plait = p.model.parameter("h.1.mlp.c_fc.weight");  // (out, in)
        EXPECT_EQ(conv[5 * 128 + 77], plait[77 * 32 + 5]);
        EXPECT_TRUE(w.has("transformer.wte.weight"));
        EXPECT_TRUE(w.has("transformer.ln_f.bias"));
      } else {
        EXPECT_TRUE(w.has("model.layers.1.self_attn.k_proj.weight"));
      }
      EXPECT_EQ(w.has("lm_head.weight"), !tied);
      fs::remove_all(out);
      fs::remove_all(path("ckpt"));
    }
  }
}

TEST_F(HfModelTest, Bf16AndFp16ExportsHoldTheRoundedValues) {
  const spec::ModelSpec m = tiny(spec::Family::llama, false);
  const Parameters p(m, 7);
  const checkpoint::CheckpointReader reader(save(m, p.model));
  for (const checkpoint::StoredType type : {checkpoint::StoredType::bf16, checkpoint::StoredType::f16}) {
    const std::string out = path(std::string("hf_") + torch_dtype_name(type));
    export_hf(reader, out, {type, ""});
    EXPECT_EQ(read_json_file(out + "/config.json").at("torch_dtype"), torch_dtype_name(type));
    const HfModel hf(out);
    std::vector<float> values;
    for (const model::NamedTensor& t : p.model.tensors()) {
      values.assign(t.numel, 0.0f);
      hf.read(t, values);
      for (std::size_t i = 0; i < t.numel; ++i) {
        const float x = p.model.parameters()[t.offset + i];
        const float want = type == checkpoint::StoredType::bf16 ? round_to_bf16(x) : half_bits_to_float(float_to_half_bits(x));
        ASSERT_EQ(values[i], want) << t.name << " " << i;
      }
    }
  }
}

TEST_F(HfModelTest, ExportRefusesANonEmptyDirectoryAndValuesBeyondFp16) {
  const spec::ModelSpec m = tiny(spec::Family::gpt2, true);
  Parameters p(m, 3);
  p.model.parameter("wpe")[10] = 1e5f;  // finite in fp32, beyond fp16
  const checkpoint::CheckpointReader reader(save(m, p.model));
  fs::create_directories(path("full"));
  put(path("full/keep.txt"), "mine");
  try {
    export_hf(reader, path("full"), {});
    FAIL() << "exported into a non-empty directory";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is not empty"), std::string::npos) << e.what();
  }
  EXPECT_EQ(bytes_of(path("full/keep.txt")), "mine");
  try {
    export_hf(reader, path("half"), {checkpoint::StoredType::f16, ""});
    FAIL() << "1e5 was exported as fp16";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor \"wpe\": element 10 (100000.000000) is beyond the range of float16"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(path("half/config.json")));
}

// --- Against Hugging Face's equations ---------------------------------------------------------

// A python3 that has torch (Debian's python3-torch lives under /usr/bin's python), or "".
std::string python_with_torch() {
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    if (plait::test::run_command(std::string(python) + " -c 'import torch'").status == 0) return python;
  }
  return "";
}

// plait's forward (the training forward, StageModel::forward_loss, its logits before the loss)
// against tests/runtime/reference/hf_forward.py, which computes LlamaForCausalLM's and
// GPT2LMHeadModel's logits from the exported directory with transformers' equations written
// out in PyTorch.
TEST_F(HfModelTest, LogitsEqualHuggingFacesEquationsInPyTorch) {
  const std::string python = python_with_torch();
  if (python.empty()) GTEST_SKIP() << "no python3 with torch (Debian: apt-get install python3-torch); the reference is not run";
  // Each family as it usually comes (GPT-2 tied, LLaMA untied); the other tying is read by the
  // same code (ExportThenImportGivesIdenticalTensorsForBothFamilies). One torch start each.
  for (const auto& [family, tied] : {std::pair{spec::Family::gpt2, true}, std::pair{spec::Family::llama, false}}) {
    {
      const spec::ModelSpec m = tiny(family, tied);
      Parameters p(m, 11);
      test::spread(p.model, 5, 8, 0.2f);
      const checkpoint::CheckpointReader reader(save(m, p.model));
      const std::string out = path("hf");
      export_hf(reader, out, {});
      constexpr int kTokens = 23;
      std::vector<std::int32_t> tokens(kTokens), targets(kTokens, 0);
      std::string args;
      for (int i = 0; i < kTokens; ++i) {
        tokens[i] = (i * 97 + 13) % m.vocab;
        args += " " + std::to_string(tokens[i]);
      }
      const plait::test::CommandResult r = plait::test::run_command(python + " " + PLAIT_SOURCE_DIR + "/tests/runtime/reference/hf_forward.py " +
                                                      out + " " + path("reference.bin") + args);
      ASSERT_EQ(r.status, 0) << r.err;
      const std::string bytes = bytes_of(path("reference.bin"));
      ASSERT_EQ(bytes.size(), sizeof(float) * kTokens * m.vocab);
      std::vector<float> reference(static_cast<std::size_t>(kTokens) * m.vocab), logits(reference.size());
      std::memcpy(reference.data(), bytes.data(), bytes.size());
      p.model.forward_loss(0, 1, {0, 0, kTokens}, nullptr, tokens.data(), targets.data(), 1.0, logits.data());
      p.model.discard(0);
      double worst = 0, largest = 0;
      for (std::size_t i = 0; i < logits.size(); ++i) {
        worst = std::max(worst, std::fabs(static_cast<double>(logits[i]) - reference[i]));
        largest = std::max(largest, std::fabs(static_cast<double>(reference[i])));
      }
      // fp32 both sides, different summation orders: agreement to a few units of the last place
      // of the largest logit.
      EXPECT_LT(worst, 2e-5 * std::max(1.0, largest)) << spec::family_name(family) << (tied ? " tied" : "")
                                                      << ": largest logit " << largest;
      EXPECT_GT(largest, 1.0);  // the logits are not trivially small
      std::printf("%s: largest |logit| %.3f, largest difference %.3g\n", spec::family_name(family).data(), largest, worst);
      fs::remove_all(out);
      fs::remove_all(path("ckpt"));
    }
  }
}

// --- A directory written by hand, as transformers lays it out -------------------------------

// Values exact in fp16 and bf16 alike (multiples of 1/64 below 4), distinct per tensor and
// position: value(tag, i).
float value(int tag, std::size_t i) { return static_cast<float>((tag * 37 + static_cast<int>(i) * 11) % 256 - 128) / 64.0f; }

RawTensor tensor(const std::string& name, const std::string& dtype, std::vector<std::int64_t> shape, int tag) {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  std::string bytes;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = value(tag, i);
    if (dtype == "F32") {
      bytes.append(reinterpret_cast<const char*>(&v), 4);
    } else {
      const std::uint16_t h = dtype == "F16" ? float_to_half_bits(v) : bf16(v).bits;
      bytes.append(reinterpret_cast<const char*>(&h), 2);
    }
  }
  return {name, dtype, std::move(shape), std::move(bytes)};
}

TEST_F(HfModelTest, AHandWrittenGpt2DirectoryInHuggingFacesLayoutLoads) {
  // GPT-2 as the Hub's "gpt2" holds it: GPT2Model's names (no "transformer." prefix, no
  // lm_head), Conv1D weights (in, out), the old attn.bias / masked_bias buffers; here in fp16
  // over two shards.
  fs::create_directories(path("gpt2"));
  put(path("gpt2/config.json"), R"({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 8,
      "n_head": 2, "n_layer": 1, "n_positions": 6, "n_ctx": 6, "vocab_size": 10, "activation_function": "gelu_new",
      "layer_norm_epsilon": 1e-05, "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1})");
  std::vector<RawTensor> first = {tensor("wte.weight", "F16", {10, 8}, 1), tensor("wpe.weight", "F16", {6, 8}, 2),
                                  tensor("h.0.ln_1.weight", "F16", {8}, 3), tensor("h.0.ln_1.bias", "F16", {8}, 4),
                                  tensor("h.0.attn.c_attn.weight", "F16", {8, 24}, 5),
                                  tensor("h.0.attn.c_attn.bias", "F16", {24}, 6),
                                  tensor("h.0.attn.bias", "F16", {1, 1, 6, 6}, 99)};
  std::vector<RawTensor> second = {tensor("h.0.attn.c_proj.weight", "F16", {8, 8}, 7),
                                   tensor("h.0.attn.c_proj.bias", "F16", {8}, 8),
                                   tensor("h.0.ln_2.weight", "F16", {8}, 9), tensor("h.0.ln_2.bias", "F16", {8}, 10),
                                   tensor("h.0.mlp.c_fc.weight", "F16", {8, 32}, 11),
                                   tensor("h.0.mlp.c_fc.bias", "F16", {32}, 12),
                                   tensor("h.0.mlp.c_proj.weight", "F16", {32, 8}, 13),
                                   tensor("h.0.mlp.c_proj.bias", "F16", {8}, 14),
                                   tensor("ln_f.weight", "F16", {8}, 15), tensor("ln_f.bias", "F16", {8}, 16)};
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (const auto& t : first) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (const auto& t : second) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  put(path("gpt2/model-00001-of-00002.safetensors"), raw_safetensors(first));
  put(path("gpt2/model-00002-of-00002.safetensors"), raw_safetensors(second));
  put(path("gpt2/model.safetensors.index.json"), index.dump());

  const HfModel hf(path("gpt2"));
  EXPECT_EQ(hf.model(), spec::gpt2_model(1, 8, 2, 10, 6));
  EXPECT_EQ(hf.weights().file_count(), 2u);
  const auto layout = model::parameter_layout(hf.model(), model::StageSpec::whole_model(hf.model()));
  const auto find = [&](const char* name) { return model::find_tensor(layout, name); };
  std::vector<float> out(24 * 8);
  hf.read(find("h.0.attn.c_attn.weight"), out);  // plait (out 24, in 8) = the file's (8, 24) transposed
  for (int o = 0; o < 24; ++o) {
    for (int i = 0; i < 8; ++i) ASSERT_EQ(out[o * 8 + i], value(5, static_cast<std::size_t>(i * 24 + o)));
  }
  std::vector<float> wte(80);
  hf.read(find("wte"), wte);
  for (std::size_t i = 0; i < 80; ++i) ASSERT_EQ(wte[i], value(1, i));
  std::vector<float> proj(8 * 32);
  hf.read(find("h.0.mlp.c_proj.weight"), proj);  // plait (8, 32) from the file's (32, 8)
  EXPECT_EQ(proj[3 * 32 + 17], value(13, 17 * 8 + 3));
  EXPECT_NE(hf.describe().find("2 weight file(s) of F16 converted to fp32"), std::string::npos) << hf.describe();

  // Wrong shape, an unknown tensor, a missing one: one line naming the tensor.
  second[4] = tensor("h.0.mlp.c_fc.weight", "F16", {32, 8}, 11);
  put(path("gpt2/model-00002-of-00002.safetensors"), raw_safetensors(second));
  EXPECT_NE(error_of(path("gpt2")).find("tensor \"h.0.mlp.c_fc.weight\": expected shape [8, 32] (from config.json), found [32, 8]"),
            std::string::npos)
      << error_of(path("gpt2"));
}

TEST_F(HfModelTest, AHandWrittenLlamaDirectoryInHuggingFacesLayoutLoads) {
  // One bf16 file, a tied head with a saved lm_head copy (transformers ignores it) and the
  // rotary inv_freq buffers older versions saved.
  fs::create_directories(path("llama"));
  put(path("llama/config.json"), R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 8,
      "intermediate_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
      "max_position_embeddings": 16, "vocab_size": 10, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
      "tie_word_embeddings": true, "hidden_act": "silu", "torch_dtype": "bfloat16", "bos_token_id": 1})");
  std::vector<RawTensor> tensors = {
      tensor("model.embed_tokens.weight", "BF16", {10, 8}, 1),
      tensor("model.layers.0.input_layernorm.weight", "BF16", {8}, 2),
      tensor("model.layers.0.self_attn.q_proj.weight", "BF16", {8, 8}, 3),
      tensor("model.layers.0.self_attn.k_proj.weight", "BF16", {4, 8}, 4),
      tensor("model.layers.0.self_attn.v_proj.weight", "BF16", {4, 8}, 5),
      tensor("model.layers.0.self_attn.o_proj.weight", "BF16", {8, 8}, 6),
      tensor("model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {2}, 98),
      tensor("model.layers.0.post_attention_layernorm.weight", "BF16", {8}, 7),
      tensor("model.layers.0.mlp.gate_proj.weight", "BF16", {12, 8}, 8),
      tensor("model.layers.0.mlp.up_proj.weight", "BF16", {12, 8}, 9),
      tensor("model.layers.0.mlp.down_proj.weight", "BF16", {8, 12}, 10),
      tensor("model.norm.weight", "BF16", {8}, 11),
      tensor("lm_head.weight", "BF16", {10, 8}, 1)};
  put(path("llama/model.safetensors"), raw_safetensors(tensors));
  const HfModel hf(path("llama"));
  EXPECT_EQ(hf.model().family, spec::Family::llama);
  EXPECT_EQ(hf.model().kv_heads, 1);
  EXPECT_TRUE(hf.model().tie_embeddings);
  const auto layout = model::parameter_layout(hf.model(), model::StageSpec::whole_model(hf.model()));
  std::vector<float> k(32);
  hf.read(model::find_tensor(layout, "model.layers.0.self_attn.k_proj.weight"), k);
  for (std::size_t i = 0; i < 32; ++i) ASSERT_EQ(k[i], value(4, i));

  tensors.push_back(tensor("model.layers.0.self_attn.q_proj.bias", "BF16", {8}, 12));
  put(path("llama/model.safetensors"), raw_safetensors(tensors));
  EXPECT_NE(error_of(path("llama")).find("tensor \"model.layers.0.self_attn.q_proj.bias\": not a tensor of LlamaForCausalLM"),
            std::string::npos)
      << error_of(path("llama"));
  tensors.pop_back();
  tensors.erase(tensors.begin() + 3);  // k_proj
  put(path("llama/model.safetensors"), raw_safetensors(tensors));
  EXPECT_NE(error_of(path("llama")).find("tensor \"model.layers.0.self_attn.k_proj.weight\": missing from the weights"),
            std::string::npos)
      << error_of(path("llama"));
  const std::string e = error_of(path("llama"));
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace plait::runtime
