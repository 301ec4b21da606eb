#pragma once
// Linear warm-up then cosine decay to a floor (Loshchilov & Hutter, "SGDR", ICLR 2017 for the
// cosine; the warm-up + cosine form of nanoGPT's train.py get_lr):
//   step < warmup:         lr = max_lr * (step + 1) / warmup
//   step >= total_steps:   lr = min_lr
//   otherwise:             r = (step - warmup) / (total_steps - warmup),
//                          lr = min_lr + 0.5 (1 + cos(pi r)) (max_lr - min_lr)
// Steps count from 0.
namespace plait::optim {

struct LRSchedule {
  double max_lr = 0;
  double min_lr = 0;
  int warmup_steps = 0;
  int total_steps = 0;

  double at(int step) const;
};

}  // namespace plait::optim
