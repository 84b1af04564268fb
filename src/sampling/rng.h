// Random sources for initial latents and ancestral noise. Three generators reproduce the
// streams other tools draw for the same seed, so one seed gives the same image everywhere:
// "cuda" (Philox, what torch draws on a GPU, sd-webui's default), "cpu" (torch's CPU
// generator, ComfyUI's default) and "std_default" (the C++ standard library engine).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace sd::sampling {

enum class RngType { StdDefault, Cuda, Cpu };

class Rng {
 public:
  virtual ~Rng();
  // n standard normal values. Successive calls continue the stream; how a call of n
  // splits into smaller calls matters (as in the tools these imitate), so callers draw
  // exactly one call per tensor.
  virtual std::vector<float> randn(size_t n) = 0;
};

std::unique_ptr<Rng> make_rng(RngType type, uint64_t seed);

// "std_default", "cuda" or "cpu"; anything else throws sd::Error listing these.
RngType parse_rng(std::string_view name);
const char* rng_name(RngType type);

}  // namespace sd::sampling
