#include "sampling/rng.h"

#include <string>

#include "sampling/rng_philox.h"
#include "sampling/rng_std_default.h"
#include "sampling/rng_torch_cpu.h"
#include "tensor/error.h"

namespace sd::sampling {

Rng::~Rng() = default;

std::unique_ptr<Rng> make_rng(RngType type, uint64_t seed) {
  switch (type) {
    case RngType::StdDefault:
      return std::make_unique<StdDefaultRng>(seed);
    case RngType::Cuda:
      return std::make_unique<PhiloxRng>(seed);
    case RngType::Cpu:
      return std::make_unique<TorchCpuRng>(seed);
  }
  fail("[rng] unknown generator type %d", static_cast<int>(type));
}

namespace {
constexpr RngType kAllRngTypes[] = {RngType::StdDefault, RngType::Cuda, RngType::Cpu};
}

RngType parse_rng(std::string_view name) {
  std::string valid;
  for (RngType type : kAllRngTypes) {
    if (name == rng_name(type)) return type;
    valid += valid.empty() ? "" : ", ";
    valid += rng_name(type);
  }
  throw Error(format("unknown rng '%.*s'; valid rngs: %s", static_cast<int>(name.size()),
                     name.data(), valid.c_str()));
}

const char* rng_name(RngType type) {
  switch (type) {
    case RngType::StdDefault:
      return "std_default";
    case RngType::Cuda:
      return "cuda";
    case RngType::Cpu:
      return "cpu";
  }
  return "unknown";
}

}  // namespace sd::sampling
