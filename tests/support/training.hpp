#pragma once
// Shared by the resume tests: runs (micro-)steps [first, last) of a run from the loader's epoch on.
namespace etnn::test {

template <class Trainer, class Loader>
void run_steps(Trainer& trainer, Loader& loader, int first, int last) {
  int step = first;
  for (int epoch = loader.epoch(); step < last; ++epoch) {
    loader.set_epoch(epoch);
    for (auto batch : loader) {
      trainer.step(batch);
      if (++step == last) break;
    }
  }
}

}  // namespace etnn::test
