// Histogram of skewed keys: three in four land in one hot bin (runs of equal keys serialise a
// naive counter loop), the rest are uniform.
#include "akaharness.h"

TensorSet akaGenerate(const Config& config, uint64_t seed) {
  const size_t n = config.getSize("n"), bins = config.getSize("bins");
  Rng rng(seed);
  const int64_t hot = rng.range(0, static_cast<int64_t>(bins) - 1);
  TensorSet in;
  int32_t* keys = in.add(Tensor("keys", DType::I32, {n})).data<int32_t>();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng.next();
    keys[i] = static_cast<int32_t>(r & 3 ? hot : static_cast<int64_t>((r >> 2) % bins));
  }
  return in;
}

TensorSet akaReference(const Config& config, const TensorSet& in) {
  const size_t n = config.getSize("n"), bins = config.getSize("bins");
  const int32_t* keys = in.at("keys").data<int32_t>();
  TensorSet ref;
  int32_t* counts = ref.add(Tensor("counts", DType::I32, {bins})).data<int32_t>();
  for (size_t i = 0; i < n; ++i) counts[keys[i]]++;
  return ref;
}
