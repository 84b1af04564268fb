// Writes a tiny random SDXL-shaped checkpoint (the pipeline tests' architecture, with the
// VAE's encoder too, for image-to-image) to a file, so the server's tests load it through
// the C API as users load real models (its shapes are read from the file) and generate in
// milliseconds per step.
#include <cstdio>

#include "pipeline/tiny_model_test_util.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.safetensors\n", argv[0]);
    return 2;
  }
  try {
    sd::pipeline::test::save_tiny_sdxl_checkpoint(argv[1], /*vae_encoder=*/true);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
