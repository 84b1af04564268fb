#include "pipeline/upscaler.h"

#include <algorithm>

#include "backend/backend_manager.h"
#include "io/esrgan_names.h"
#include "models/tiling.h"
#include "nn/graph_runner.h"
#include "nn/param_recorder.h"
#include "pipeline/image_tensor.h"
#include "tensor/error.h"
#include "weights/model_loader.h"
#include "weights/model_manager.h"

namespace sd::pipeline {
namespace {

// stable-diffusion.cpp's upscaler blends tiles that overlap by a quarter of a tile.
constexpr float kTileOverlap = 0.25f;

// The file's weights under Real-ESRGAN's names (io/esrgan_names.h).
class RenamedWeights final : public nn::Weights {
 public:
  RenamedWeights(nn::Weights& inner, std::map<std::string, std::string> names)
      : inner_(inner), names_(std::move(names)) {}
  Tensor* get(Context& ctx, const std::string& name, const Shape& ne) override {
    return inner_.get(ctx, stored(name), ne);
  }
  bool contains(const std::string& name) const override { return names_.count(name) != 0; }
  void after_compute() override { inner_.after_compute(); }
  const std::string& stored(const std::string& name) const {
    auto it = names_.find(name);
    return it == names_.end() ? name : it->second;
  }

 private:
  nn::Weights& inner_;
  std::map<std::string, std::string> names_;
};

int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

// Real-ESRGAN pads an image to a multiple of the unshuffle factor by reflection at the
// right and bottom edges (F.pad(..., 'reflect')); a side too short to reflect repeats its
// edge.
std::vector<float> reflect_pad(const std::vector<float>& in, int64_t w, int64_t h, int64_t c,
                               int64_t pw, int64_t ph) {
  auto source = [](int64_t i, int64_t n) {
    if (i < n) return i;
    const int64_t r = 2 * (n - 1) - i;
    return r >= 0 ? r : n - 1;
  };
  std::vector<float> out(static_cast<size_t>(pw * ph * c));
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = 0; y < ph; ++y)
      for (int64_t x = 0; x < pw; ++x)
        out[(ch * ph + y) * pw + x] = in[(ch * h + source(y, h)) * w + source(x, w)];
  return out;
}

std::vector<float> crop(const std::vector<float>& in, int64_t w, int64_t h, int64_t c, int64_t cw,
                        int64_t ch_) {
  std::vector<float> out(static_cast<size_t>(cw * ch_ * c));
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = 0; y < ch_; ++y)
      std::copy_n(in.begin() + (ch * h + y) * w, cw, out.begin() + (ch * ch_ + y) * cw);
  return out;
}

}  // namespace

models::EsrganConfig detect_esrgan_config(const std::map<std::string, Shape>& tensors,
                                          const std::string& what) {
  auto shape = [&](const std::string& name) -> const Shape* {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  };
  const Shape* first = shape("conv_first.weight");
  const Shape* last = shape("conv_last.weight");
  SD_CHECK(first && last,
           "'%s' is not an ESRGAN upscaler model: it has no conv_first/conv_last tensors "
           "(Real-ESRGAN names) nor model.0/model.N (original ESRGAN names)",
           what.c_str());
  models::EsrganConfig c;
  c.num_in_ch = (*first)[2];
  c.num_feat = (*first)[3];
  c.num_out_ch = (*last)[3];
  SD_CHECK(c.num_out_ch == 3 && (*last)[2] == c.num_feat,
           "'%s': conv_last maps %lld features to %lld channels; an RGB upscaler maps %lld to 3",
           what.c_str(), static_cast<long long>((*last)[2]), static_cast<long long>(c.num_out_ch),
           static_cast<long long>(c.num_feat));
  // Real-ESRGAN's x2 and x1 models read the image pixel-unshuffled by 2 and 4.
  switch (c.num_in_ch) {
    case 3:
      c.unshuffle = 1;
      break;
    case 12:
      c.unshuffle = 2;
      break;
    case 48:
      c.unshuffle = 4;
      break;
    default:
      fail(
          "'%s': conv_first reads %lld channels; ESRGAN models read 3 (or 12 / 48, an image "
          "pixel-unshuffled by 2 / 4)",
          what.c_str(), static_cast<long long>(c.num_in_ch));
  }
  c.num_block = 0;
  for (const auto& [name, ne] : tensors) {
    if (name.compare(0, 5, "body.") != 0) continue;
    const size_t dot = name.find('.', 5);
    if (dot == std::string::npos || dot == 5 || dot > 10) continue;
    const std::string index = name.substr(5, dot - 5);
    if (index.find_first_not_of("0123456789") != std::string::npos) continue;
    c.num_block = std::max(c.num_block, std::stoi(index) + 1);
  }
  if (const Shape* grow = shape("body.0.rdb1.conv1.weight")) c.num_grow_ch = (*grow)[3];
  const bool up1 = shape("conv_up1.weight") != nullptr, up2 = shape("conv_up2.weight") != nullptr;
  SD_CHECK(up1 || !up2, "'%s' has conv_up2 but no conv_up1", what.c_str());
  c.num_upsample = up2 ? 2 : up1 ? 1 : 0;
  SD_CHECK((1 << c.num_upsample) % c.unshuffle == 0,
           "'%s': %d upsampling layers after a pixel-unshuffle by %d would shrink the image",
           what.c_str(), c.num_upsample, c.unshuffle);
  return c;
}

struct Upscaler::Impl {
  UpscalerOptions options;
  BackendManager backends;
  weights::ModelLoader loader;
  std::unique_ptr<weights::ModelManager> manager;
  std::unique_ptr<RenamedWeights> weights;
  models::EsrganConfig config;
  std::unique_ptr<nn::GraphRunner> runner;
  size_t peak_compute_buffer = 0;

  explicit Impl(const UpscalerOptions& o)
      : options(o), backends(o.backend, o.params_backend, BackendOptions{o.threads}) {
    loader.add(o.model, io::FileRole::Model);
    std::vector<std::string> stored;
    for (const auto& [name, source] : loader.tensors()) stored.push_back(name);
    std::map<std::string, std::string> names = io::esrgan_tensor_names(stored);
    std::map<std::string, Shape> shapes;
    for (const auto& [canonical, name] : names) shapes[canonical] = loader.find(name).ne;
    config = detect_esrgan_config(shapes, o.model);

    manager = std::make_unique<weights::ModelManager>(
        loader, weights::ModelManagerOptions{o.weight_type, true, usable_threads(o.threads)});
    const Module m = Module::Upscaler;
    manager->add_module(weights::ModuleSpec{
        module_name(m), {""}, &backends.compute_device(m), backends.residency(m)});
    weights = std::make_unique<RenamedWeights>(*manager, std::move(names));
    runner = std::make_unique<nn::GraphRunner>(backends.backend(m));

    // Every weight the network reads, checked against the file now.
    nn::ParamRecorder recorder(*weights);
    Context ctx;
    models::rrdbnet(nn::Scope(ctx, recorder), config,
                    ctx.new_tensor(DType::F32, {8, 8, config.num_in_ch, 1}));
    std::vector<nn::ParamDecl> params = recorder.params();
    for (nn::ParamDecl& p : params) p.name = weights->stored(p.name);
    manager->declare(module_name(m), params);
  }

  // The network on one image or tile: [w, h, 3] -> [w * scale, h * scale, 3].
  std::vector<float> run(const std::vector<float>& planes, int64_t w, int64_t h) {
    const int r = config.unshuffle;
    const int64_t pw = round_up(w, r), ph = round_up(h, r);
    std::vector<float> input = (pw == w && ph == h) ? planes : reflect_pad(planes, w, h, 3, pw, ph);
    int64_t iw = pw, ih = ph;
    if (r > 1) {
      std::vector<float> unshuffled(input.size());
      models::pixel_unshuffle(input.data(), pw, ph, 3, r, unshuffled.data());
      input = std::move(unshuffled);
      iw /= r;
      ih /= r;
    }
    nn::GraphCall call;
    Tensor* x = call.input_f32("image", make_shape({iw, ih, config.num_in_ch, 1}), input.data());
    std::vector<float> out =
        runner->run(call, models::rrdbnet(nn::Scope(call.ctx(), *weights), config, x));
    weights->after_compute();
    peak_compute_buffer = std::max(peak_compute_buffer, runner->compute_buffer_size());
    const int64_t up = int64_t{1} << config.num_upsample;
    const int s = config.scale();
    if (iw * up == w * s && ih * up == h * s) return out;
    return crop(out, iw * up, ih * up, 3, w * s, h * s);
  }

  // The module's phase is over: weights kept on disk and the working memory go back.
  void done() {
    runner->release();
    manager->phase_done(module_name(Module::Upscaler));
    backends.release_caches();
  }
};

Upscaler::Upscaler(const UpscalerOptions& options) : impl_(std::make_unique<Impl>(options)) {}

Upscaler::~Upscaler() = default;

const models::EsrganConfig& Upscaler::config() const {
  return impl_->config;
}

std::string Upscaler::placement() const {
  return impl_->backends.describe(Module::Upscaler);
}

size_t Upscaler::last_peak_compute_buffer() const {
  return impl_->peak_compute_buffer;
}

std::vector<float> Upscaler::upscale_planes(const std::vector<float>& planes, int64_t width,
                                            int64_t height) {
  SD_CHECK(width > 0 && height > 0 && planes.size() == static_cast<size_t>(width * height * 3),
           "[upscale] expected an RGB image of %lldx%lld pixels", static_cast<long long>(width),
           static_cast<long long>(height));
  const int s = scale();
  const int tile = impl_->options.tile_size;
  std::vector<float> out;
  impl_->peak_compute_buffer = 0;
  try {
    if (tile <= 0 || (width <= tile && height <= tile)) {
      out = impl_->run(planes, width, height);
    } else {
      models::TiledArray tiled = models::process_tiles_2d(
          planes, width, height, 3, width * s, height * s, s, tile, tile, kTileOverlap,
          [&](const std::vector<float>& t, int64_t tw, int64_t th) {
            return impl_->run(t, tw, th);
          });
      out = std::move(tiled.data);
    }
  } catch (...) {
    impl_->done();
    throw;
  }
  impl_->done();
  return out;
}

io::Image Upscaler::upscale(const io::Image& image) {
  // The network reads RGB: gray is repeated, alpha dropped.
  const io::Image rgb = image.channels == 3 ? image : io::to_channels(image, 3);
  const std::vector<float> out = upscale_planes(image_to_planes(rgb), rgb.width, rgb.height);
  const int s = scale();
  return planes_to_image(out.data(), image.width * s, image.height * s, 3);
}

}  // namespace sd::pipeline
