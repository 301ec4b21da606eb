#include "plait/model/block.h"

#include "plait/model/gpt2_block.h"
#include "plait/model/llama_block.h"

namespace plait::model {

std::unique_ptr<Block> make_block(const spec::ModelSpec& model, int layer, float* parameters,
                                  float* gradients, const std::vector<NamedTensor>& tensors,
                                  kernels::Backend& backend) {
  if (model.family == spec::Family::gpt2) {
    return std::make_unique<Gpt2Block>(model, Gpt2Tensors::locate(model, parameters, tensors, layer),
                                       Gpt2Tensors::locate(model, gradients, tensors, layer), backend);
  }
  return std::make_unique<LlamaBlock>(model, LlamaTensors::locate(model, parameters, tensors, layer),
                                      LlamaTensors::locate(model, gradients, tensors, layer), backend);
}

}  // namespace plait::model
