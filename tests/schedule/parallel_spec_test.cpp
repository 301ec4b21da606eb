// The "parallel" section as the runtime and the planner share it: read strictly, written back
// unchanged, and turned into the schedule it describes. (Every reader error of docs/config.md is
// asserted through the runtime's config reader in tests/runtime/parallel_config_test.cpp.)
#include "plait/schedule/parallel_spec.h"

#include <gtest/gtest.h>

#include "plait/core/error.h"
#include "plait/schedule/heterogeneous_pipeline.h"
#include "plait/schedule/replicate.h"
#include "plait/schedule/schedule_family.h"
#include "plait/schedule/validator.h"

namespace plait::schedule {
namespace {

ParallelSpec parse(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(R"({"parallel": )" + text + "}");
  return parse_parallel_spec(JsonFields(doc, "f.json").object("parallel"));
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ParallelSpec, WritesWhatItReads) {
  for (const char* text : {
           R"({"schedule": "seq1f1b-i", "pp": 2, "dp": 3, "chunks": 2, "split": "flops", "layers": [1, 2, 2, 1]})",
           R"({"schedule": "zb-v", "pp": 4, "dp": 1})",
           R"({"schedule": "zb-h1", "pp": 2, "dp": 1, "recompute": "full"})",
           R"({"schedule": "1f1b", "pp": 2, "dp": 1, "recompute": 2})",
           R"({"rank_vstages": [[0], [1]], "layers": [2, 1], "schedule_text": ["-", "-"], "schedule_name": "x",
               "recompute": [1, 0]})",
           R"({"rank_vstages": [[0], [0], [1, 2]], "layers": [3, 2, 1], "schedule_text": ["-", "F0.0", ""],
               "schedule_name": "mine",
               "devices": [{"type": "a", "slowdown": 2.5, "memory_bytes": 1000}, {"type": "b", "slowdown": 1},
                           {"type": "host", "slowdown": 1}]})",
       }) {
    const nlohmann::json written = to_json(parse(text));
    EXPECT_EQ(written, nlohmann::json::parse(text)) << text;
    EXPECT_EQ(to_json(parse(written.dump())), written);
  }
  const ParallelSpec defaults = parse("{}");
  EXPECT_EQ(defaults.form, ParallelSpec::Form::generated);
  EXPECT_EQ(defaults.schedule, "seq1f1b");
  EXPECT_EQ(defaults.world_size(), 1);
  EXPECT_EQ(parse(R"({"rank_vstages": [[0], [1]], "layers": [1, 1], "schedule_text": ["-", "-"]})").schedule_name,
            "explicit");
}

// The generated form is the family's pipeline of pp ranks, replicated dp times; chunks default
// to the family's fixed value (2 for zb-v, and 2 for the families that take v from the caller).
TEST(ParallelSpec, GeneratedFormIsTheFamilysPipelineReplicated) {
  EXPECT_EQ(parallel_schedule(parse(R"({"schedule": "seq1f1b", "pp": 2, "dp": 2})"), 4, 3, "f.json"),
            replicate(generate_schedule("seq1f1b", {2, 1, 4, 3}), 2));
  EXPECT_EQ(parallel_schedule(parse(R"({"schedule": "zb-v", "pp": 2})"), 4, 1, "f.json"),
            generate_schedule("zb-v", {2, 2, 4, 1}));
  EXPECT_EQ(parallel_schedule(parse(R"({"schedule": "interleaved", "pp": 2})"), 4, 1, "f.json"),
            generate_schedule("interleaved", {2, 2, 4, 1}));
  EXPECT_EQ(parallel_schedule(parse(R"({"schedule": "interleaved", "pp": 2, "chunks": 3})"), 4, 1, "f.json"),
            generate_schedule("interleaved", {2, 3, 4, 1}));
  EXPECT_EQ(error_of([] { parallel_schedule(parse(R"({"schedule": "1f1b", "pp": 2})"), 4, 2, "f.json"); }),
            "f.json: parallel.schedule: " + unsupported_reason(*find_schedule_family("1f1b"), {2, 1, 4, 2}));
}

// A heterogeneous schedule (stage 0 on two ranks with uneven counts, chunk labels on the rank
// holding two stages) written in the explicit form reads back as the same schedule.
TEST(ParallelSpec, ExplicitFormRoundTripsASchedule) {
  HeterogeneousPipeline h;
  h.num_microbatches = 6;
  h.num_segments = 2;
  h.stage_ranks = {{0, 1}, {2}};
  h.stage_counts = {{4, 2}, {6}};
  h.chunks = 2;
  HeterogeneousCosts costs;
  costs.unit_seconds = [](int rank, ActionKind, std::int32_t, std::int32_t) { return rank == 1 ? 2.0 : 1.0; };
  const Schedule s = heterogeneous_schedule("seq1f1b-i", h, costs);
  ASSERT_FALSE(validate(s).has_value());
  const ParallelSpec spec = explicit_parallel_spec(s, {1, 1, 1, 1}, "seq1f1b-i");
  EXPECT_EQ(spec.form, ParallelSpec::Form::explicit_layout);
  EXPECT_NE(spec.schedule_text[0].find("c1"), std::string::npos) << spec.schedule_text[0];
  EXPECT_EQ(parallel_schedule(spec, 6, 2, "f.json"), s);
  // Through JSON, as a plan file holds it.
  EXPECT_EQ(parallel_schedule(parse(to_json(spec).dump()), 6, 2, "f.json"), s);
  EXPECT_FALSE(to_json(spec).contains("split"));
  // A segment count's split too (plait plan --documents: cut per micro-batch from its documents).
  ParallelSpec flops = spec;
  flops.split = "flops";
  const ParallelSpec back = parse(to_json(flops).dump());
  EXPECT_EQ(back.split, "flops");
  EXPECT_EQ(parallel_schedule(back, 6, 2, "f.json"), s);
  EXPECT_EQ(error_of([&] {
              nlohmann::json j = to_json(spec);
              j["split"] = "fast";
              parse(j.dump());
            }),
            "f.json: parallel.split: expected \"even\" or \"flops\", found \"fast\"");
}

// parallel.recompute in its four forms; "none" is the default and is not written.
TEST(ParallelSpec, RecomputeIsReadInEveryForm) {
  EXPECT_EQ(parse("{}").recompute, spec::Recompute{});
  EXPECT_EQ(parse(R"({"recompute": "none"})").recompute, spec::Recompute{});
  EXPECT_FALSE(to_json(parse(R"({"recompute": "none"})")).contains("recompute"));
  EXPECT_EQ(parse(R"({"recompute": "full"})").recompute, spec::Recompute::full());
  EXPECT_EQ(parse(R"({"recompute": 3})").recompute, spec::Recompute::layers_each(3));
  EXPECT_EQ(parse(R"({"recompute": [2, 0, 1]})").recompute, spec::Recompute::stages({2, 0, 1}));
  const std::string expected =
      "f.json: parallel.recompute: expected \"none\", \"full\", a number of layers per stage or a list of "
      "one count per virtual stage, found ";
  EXPECT_EQ(error_of([] { parse(R"({"recompute": "some"})"); }), expected + "\"some\"");
  EXPECT_EQ(error_of([] { parse(R"({"recompute": []})"); }), expected + "[]");
  EXPECT_EQ(error_of([] { parse(R"({"recompute": true})"); }), expected + "true");
  EXPECT_EQ(error_of([] { parse(R"({"recompute": -1})"); }), "f.json: parallel.recompute: expected layer counts >= 0, found -1");
  EXPECT_EQ(error_of([] { parse(R"({"recompute": [1, 1.5]})"); }),
            "f.json: parallel.recompute: expected layer counts >= 0, found 1.5");
}

TEST(ParallelSpec, ExplicitFormErrorsNameTheField) {
  EXPECT_EQ(error_of([] {
              parallel_schedule(parse(R"({"rank_vstages": [[0, 0]], "layers": [1], "schedule_text": ["-"]})"), 1, 1,
                                "f.json");
            }),
            "f.json: parallel.rank_vstages: schedule layout: rank 0 holds virtual stage 0 twice (chunks 0 and 1)");
  EXPECT_EQ(error_of([] {
              parallel_schedule(parse(R"({"rank_vstages": [[0], [1]], "layers": [1, 1], "schedule_text": ["-", "F0.0\nF1.0"]})"),
                                1, 1, "f.json");
            }),
            "f.json: parallel.schedule_text[1]: expected one line of actions for rank 1 (no newlines)");
  EXPECT_EQ(error_of([] {
              parallel_schedule(parse(R"({"rank_vstages": [[0], [1]], "layers": [1, 1], "schedule_text": ["F0.0 X", "-"]})"),
                                1, 1, "f.json");
            }).rfind("f.json: parallel.schedule_text[0]: line 1, column 6: ", 0),
            0u);
  EXPECT_EQ(error_of([] { parse(R"({"pp": 2, "devices": [{}]})"); }),
            "f.json: parallel.devices: expected one device per rank (2), found 1");
  EXPECT_EQ(error_of([] { parse(R"({"rank_vstages": [[0]], "layers": [1], "schedule_text": ["-"], "colour": 1})"); }),
            "f.json: parallel.colour: unknown field");
}

}  // namespace
}  // namespace plait::schedule
