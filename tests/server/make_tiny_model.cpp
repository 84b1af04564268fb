// Writes a tiny random SDXL-shaped checkpoint (the pipeline tests' architecture, with the
// VAE's encoder too, for image-to-image) to a file, so the server's tests load it through
// the C API as users load real models (its shapes are read from the file) and generate in
// milliseconds per step. With a second path, also a tiny ControlNet for it.
#include <cstdio>

#include "pipeline/tiny_controlnet_test_util.h"
#include "pipeline/tiny_model_test_util.h"

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s OUT.safetensors [CONTROLNET.safetensors]\n", argv[0]);
    return 2;
  }
  try {
    using namespace sd::pipeline::test;
    save_tiny_sdxl_checkpoint(argv[1], /*vae_encoder=*/true);
    if (argc == 3)
      write_tiny_controlnet(tiny_controlnet_config(tiny_sdxl_architecture().unet), argv[2]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
