// What a diffusion network is conditioned on, as the text side hands it to the sampler.
#pragma once

#include <cstdint>
#include <vector>

namespace sd::pipeline {

// f32 [dim, tokens] (dim fastest): tokens = 77 per CLIP window (256 per T5 window for
// FLUX.1). `vector`: the network's vector conditioning (SDXL's label_emb input, FLUX.1's
// pooled CLIP-L output), empty for models without one.
struct Conditioning {
  std::vector<float> context;
  int64_t dim = 0;
  int64_t tokens = 0;
  std::vector<float> pooled;  // SDXL: the second encoder's pooled, projected output
  std::vector<float> vector;
  // Chroma: what the transformer adds to each text token's attention scores (0, or -inf for
  // masked padding), one value per token; empty: every token is attended.
  std::vector<float> mask;
};

}  // namespace sd::pipeline
