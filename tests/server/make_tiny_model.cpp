// Writes the tiny random SDXL-shaped checkpoint of the pipeline tests to a file, so the
// server's tests can load it through the C API as users load real models (its shapes are
// read from the file) and generate in milliseconds per step.
#include <cstdio>
#include <filesystem>

#include "pipeline/tiny_model_test_util.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.safetensors\n", argv[0]);
    return 2;
  }
  try {
    const std::string path = sd::pipeline::test::write_tiny_sdxl_checkpoint();
    // The checkpoint lives in a folder removed at exit.
    std::filesystem::copy_file(path, argv[1], std::filesystem::copy_options::overwrite_existing);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
