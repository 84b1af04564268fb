// Writes a tiny random SDXL-shaped checkpoint (the pipeline tests' architecture, with the
// VAE's encoder too, for image-to-image) to a file, so the server's tests load it through
// the C API as users load real models (its shapes are read from the file) and generate in
// milliseconds per step.
#include <cstdio>

#include "models/clip_text.h"
#include "models/unet.h"
#include "models/vae.h"
#include "nn/random_weights.h"
#include "pipeline/tiny_model_test_util.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.safetensors\n", argv[0]);
    return 2;
  }
  try {
    using namespace sd;
    const pipeline::Architecture a = pipeline::test::tiny_sdxl_architecture();
    nn::RandomWeights w(DType::F16, 11);
    Context ctx;
    // Building each network's graph once asks for every weight it reads.
    Tensor* x = ctx.new_tensor(DType::F32, {8, 8, 4, 1});
    Tensor* t = ctx.new_tensor(DType::F32, {1});
    Tensor* c = ctx.new_tensor(DType::F32, {a.unet.context_dim, 77, 1});
    Tensor* y = ctx.new_tensor(DType::F32, {a.unet.adm_in_channels, 1});
    models::unet_forward(nn::Scope(ctx, w, "model.diffusion_model."), a.unet, x, t, c, y);
    Tensor* ids = ctx.new_tensor(DType::I32, {77, 1});
    Tensor* mask = ctx.new_tensor(DType::F32, {77, 77});
    models::clip_text_forward(nn::Scope(ctx, w, "cond_stage_model.transformer.text_model."), a.text,
                              ids, mask, 1);
    models::clip_text_forward_pooled(
        nn::Scope(ctx, w, "cond_stage_model.1.transformer.text_model."), *a.text2, ids, mask, 1, 0);
    Tensor* z = ctx.new_tensor(DType::F32, {8, 8, 4, 1});
    Tensor* image = ctx.new_tensor(DType::F32, {16, 16, 3, 1});
    models::vae_decode(nn::Scope(ctx, w, "first_stage_model."), a.vae, z);
    models::vae_encode(nn::Scope(ctx, w, "first_stage_model."), a.vae, image);
    w.save_safetensors(argv[1]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
