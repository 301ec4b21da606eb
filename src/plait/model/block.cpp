#include "plait/model/block.h"

#include "plait/model/gpt2_block.h"
#include "plait/model/llama_block.h"

namespace plait::model {
namespace {

template <typename T>
std::unique_ptr<Block> make_typed_block(const spec::ModelSpec& model, int layer, T* parameters,
                                        float* gradients, const std::vector<NamedTensor>& tensors,
                                        kernels::Backend& backend, TensorParallelGroup* tp) {
  if (model.family == spec::Family::gpt2) {
    return std::make_unique<Gpt2Block<T>>(
        model, Gpt2Tensors<T>::locate(model, parameters, tensors, layer),
        Gpt2Tensors<float>::locate(model, gradients, tensors, layer), backend, tp);
  }
  return std::make_unique<LlamaBlock<T>>(
      model, LlamaTensors<T>::locate(model, parameters, tensors, layer),
      LlamaTensors<float>::locate(model, gradients, tensors, layer), backend, tp);
}

}  // namespace

std::unique_ptr<Block> make_block(const spec::ModelSpec& model, int layer, TypedPtr parameters,
                                  float* gradients, const std::vector<NamedTensor>& tensors,
                                  kernels::Backend& backend, TensorParallelGroup* tp) {
  if (parameters.dtype == DType::bf16) {
    return make_typed_block(model, layer, parameters.as<bf16>(), gradients, tensors, backend, tp);
  }
  return make_typed_block(model, layer, parameters.as<float>(), gradients, tensors, backend, tp);
}

}  // namespace plait::model
