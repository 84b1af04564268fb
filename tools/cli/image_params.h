// The generation parameters sd-cli embeds in each image it writes, in the layout
// stable-diffusion.cpp (and before it stable-diffusion-webui) uses, so tools that read
// those files read ours:
//   <prompt>
//   Negative prompt: <negative prompt>              (only when there is one)
//   Steps: 20, CFG scale: 7.000000, Guidance: 3.500000, Eta: inf, Seed: 42, Size: 512x512,
//   Model: <file name>, RNG: cuda, Sampler: euler_a discrete, ..., Version: <generator>,
//   SDCPP: {<the same as JSON, schema "sdcpp.image.params/v1">}
// (the third part is one line). Numbers are printed as std::to_string prints them.
#pragma once

#include <cstdint>
#include <string>

#include "cli/args.h"

namespace sd::cli {

// The name written after "Version: " and as the JSON generator name.
extern const char* const kGeneratorName;

// `seed` is the seed of this image (the run's seed plus its batch index).
std::string image_parameters(const ContextOptions& context, const GenerationOptions& generation,
                             int64_t seed, Mode mode);

// The "SDCPP" JSON object alone.
std::string image_parameters_json(const ContextOptions& context,
                                  const GenerationOptions& generation, int64_t seed, Mode mode);

}  // namespace sd::cli
