// The single-process step on packed documents (runtime::LocalTrainer over the real loader with
// data.packing "documents", runtime/mpi/packed_tiny_data.h): its loss and gradients equal those
// of every document of the global batch run one by one, alone (model::StageModel, one row each,
// its targets as in its packed row), with the loss normalised by the targets that count -- for
// both families, whole sequences and Seq1F1B segments cut inside documents. This pins the
// runtime's part (the document mask set per micro-batch, data::counted_targets as the
// normaliser); tests/model/packed_documents_test.cpp pins the engine's, and the multi-rank
// equivalence (mpi/packed_equivalence_test.cpp) the distributed runtime against this trainer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "plait/data/document_mask.h"
#include "plait/runtime/local_trainer.h"
#include "runtime/mpi/packed_tiny_data.h"
#include "runtime/mpi/tiny_job.h"

namespace plait::runtime {
namespace {

struct OneByOne {
  double loss = 0;
  std::vector<float> gradients;
  int documents = 0, padded_rows = 0;
};

// Every document of step 0's micro-batches alone, accumulated into one model's gradients.
OneByOne one_by_one(const spec::ModelSpec& model, const TrainConfig& t, const data::BatchSource& source) {
  MemoryTracker tracker;
  model::StageModel m(model, model::StageSpec::whole_model(model), tracker);
  m.init_parameters(t.seed);
  const double scale = 1.0 / static_cast<double>(data::counted_targets(source, 0, t.microbatches));
  OneByOne r;
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(t.microbatch_size) * t.seq), targets(inputs.size());
  int unit = 0;
  for (int mb = 0; mb < t.microbatches; ++mb) {
    source.fill(0, mb, inputs.data(), targets.data());
    const std::vector<data::SequenceDocuments> rows = source.documents(0, mb);
    for (int b = 0; b < t.microbatch_size; ++b) {
      const data::SequenceDocuments& d = rows[static_cast<std::size_t>(b)];
      if (d.tokens < t.seq) ++r.padded_rows;
      for (std::size_t j = 0; j < d.starts.size(); ++j) {
        const int a = d.starts[j], z = j + 1 < d.starts.size() ? d.starts[j + 1] : d.tokens;
        const std::size_t at = static_cast<std::size_t>(b) * t.seq;
        const spec::Segment whole{0, 0, z - a};
        r.loss += m.forward_loss(unit, 1, whole, nullptr, inputs.data() + at + a, targets.data() + at + a, scale);
        m.backward(unit++, whole, nullptr, nullptr);
        ++r.documents;
      }
    }
  }
  r.gradients.assign(m.gradients().begin(), m.gradients().end());
  return r;
}

class PackedTraining : public ::testing::TestWithParam<spec::Family> {};

TEST_P(PackedTraining, TheStepEqualsItsDocumentsOneByOne) {
  const spec::ModelSpec model = test::tiny_job_model(GetParam(), 2);
  const test::TinyData tokens(model.vocab);
  for (int segments : {1, 3}) {
    TrainConfig t = test::tiny_job("1f1b", 1, 1, 4, segments, GetParam()).run.train;
    const test::PackedTinyData packed(tokens, t.seq);
    const data::SequentialLoader loader = packed.loader(t);
    const OneByOne want = one_by_one(model, t, loader);
    ASSERT_GT(want.documents, t.microbatches * t.microbatch_size) << "rows of several documents";
    ASSERT_GT(want.padded_rows, 0) << "some padding";
    MemoryTracker tracker;
    LocalTrainer trainer(model, t, spec::cut_sequence(model, t.seq, t.segments), tracker);
    const StepResult got = trainer.step(0, loader);
    double worst = 0;
    for (const model::NamedTensor& tensor : trainer.model().tensors()) {
      double err = 0, scale = 0;
      const auto g = trainer.model().gradient(tensor.name);
      for (std::size_t i = 0; i < g.size(); ++i) {
        err = std::max(err, std::abs(double(g[i]) - want.gradients[tensor.offset + i]));
        scale = std::max(scale, std::abs(double(want.gradients[tensor.offset + i])));
      }
      worst = std::max(worst, err / scale);
    }
    EXPECT_NEAR(got.loss, want.loss, 1e-6 * want.loss) << segments << " segments";
    EXPECT_LE(worst, 1e-5) << segments << " segments";
    std::printf("[ measured ] %s, %d segment(s), %d documents (%d padded rows): loss %.6f vs %.6f, worst gradient "
                "error %.2e\n",
                std::string(spec::family_name(model.family)).c_str(), segments, want.documents, want.padded_rows,
                got.loss, want.loss, worst);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, PackedTraining,
                         ::testing::Values(spec::Family::gpt2, spec::Family::llama),
                         [](const auto& info) { return std::string(spec::family_name(info.param)); });

}  // namespace
}  // namespace plait::runtime
