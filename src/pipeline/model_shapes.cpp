#include "pipeline/model_shapes.h"

#include "tensor/error.h"

namespace sd::pipeline {

namespace {

long long ll(int64_t v) {
  return static_cast<long long>(v);
}

// Transformer blocks of the SpatialTransformer at `prefix` ("...input_blocks.4.1.").
int transformer_depth(const std::string& prefix, const ShapeOf& shape_of) {
  int depth = 0;
  while (shape_of(prefix + "transformer_blocks." + std::to_string(depth) + ".norm1.weight"))
    ++depth;
  return depth;
}

}  // namespace

models::UnetConfig unet_config_from_shapes(models::UnetConfig c, std::string_view scope,
                                           const ShapeOf& shape_of) {
  const std::string root(scope);
  auto need = [&](const std::string& name) {
    const std::optional<std::array<int64_t, 4>> ne = shape_of(root + name);
    SD_CHECK(ne.has_value(), "[unet] the model has no tensor '%s%s'", root.c_str(), name.c_str());
    return *ne;
  };
  const std::array<int64_t, 4> conv_in = need("input_blocks.0.0.weight");  // [3, 3, in, mc]
  c.in_channels = conv_in[2];
  c.model_channels = conv_in[3];
  c.out_channels = need("out.2.weight")[3];
  const int64_t mc = c.model_channels;

  // Input blocks, in order: res blocks (with a transformer where the level has attention),
  // a downsampling conv ("op") between levels.
  c.channel_mult.clear();
  c.level_depth.clear();
  c.attention_levels.clear();
  int res_in_level = 0, res_per_level = -1;
  bool transformers_seen = false;
  std::vector<int> input_depths;
  for (int block = 1;; ++block) {
    const std::string b = "input_blocks." + std::to_string(block) + ".";
    if (shape_of(root + b + "0.op.weight")) {
      SD_CHECK(res_per_level < 0 || res_in_level == res_per_level,
               "[unet] level %zu has %d res blocks, the first %d (not a UNet this engine runs)",
               c.channel_mult.size() - 1, res_in_level, res_per_level);
      res_per_level = res_in_level;
      res_in_level = 0;
      continue;
    }
    const std::optional<std::array<int64_t, 4>> conv1 = shape_of(root + b + "0.in_layers.2.weight");
    if (!conv1) break;
    const int64_t out = (*conv1)[3];
    const int depth = transformer_depth(root + b + "1.", shape_of);
    input_depths.push_back(depth);
    if (res_in_level == 0) {
      SD_CHECK(out % mc == 0, "[unet] %s has %lld channels, not a multiple of %lld",
               (root + b).c_str(), ll(out), ll(mc));
      c.channel_mult.push_back(static_cast<int>(out / mc));
      c.level_depth.push_back(depth);
      if (depth > 0) c.attention_levels.push_back(static_cast<int>(c.channel_mult.size()) - 1);
    }
    if (depth > 0 && !transformers_seen) {
      transformers_seen = true;
      c.context_dim = need(b + "1.transformer_blocks.0.attn2.to_k.weight")[0];
      c.linear_proj = need(b + "1.proj_in.weight")[0] != 1;  // a 1x1 conv is [1, 1, in, out]
    }
    ++res_in_level;
  }
  SD_CHECK(!c.channel_mult.empty(), "[unet] the model has no res blocks under %sinput_blocks",
           root.c_str());
  SD_CHECK(res_per_level < 0 || res_in_level == res_per_level,
           "[unet] the last level has %d res blocks, the first %d", res_in_level, res_per_level);
  c.num_res_blocks = res_per_level < 0 ? res_in_level : res_per_level;
  c.middle_depth = transformer_depth(root + "middle_block.1.", shape_of);
  if (!transformers_seen && c.middle_depth > 0) {
    c.context_dim = need("middle_block.1.transformer_blocks.0.attn2.to_k.weight")[0];
    c.linear_proj = need("middle_block.1.proj_in.weight")[0] != 1;
  }
  c.transformer_depth = 1;
  for (int d : c.level_depth) c.transformer_depth = std::max(c.transformer_depth, d);
  // Distilled UNets (SSD-1B, Vega) vary the transformer depth within a level: keep every
  // block's own when any differs from its level's.
  std::vector<int> output_depths;
  for (size_t block = 0; block < c.channel_mult.size() * (c.num_res_blocks + 1); ++block)
    output_depths.push_back(
        transformer_depth(root + "output_blocks." + std::to_string(block) + ".1.", shape_of));
  c.input_block_depth.clear();
  c.output_block_depth.clear();
  bool uniform = true;
  for (int level = 0; level < static_cast<int>(c.channel_mult.size()); ++level) {
    for (int j = 0; j < c.num_res_blocks; ++j)
      uniform = uniform && input_depths[level * c.num_res_blocks + j] == c.depth_at(level);
    for (int j = 0; j <= c.num_res_blocks; ++j)
      uniform = uniform &&
                output_depths[(c.channel_mult.size() - 1 - level) * (c.num_res_blocks + 1) + j] ==
                    c.depth_at(level);
  }
  if (!uniform) {
    c.input_block_depth = input_depths;
    c.output_block_depth = output_depths;
  }
  const std::optional<std::array<int64_t, 4>> label = shape_of(root + "label_emb.0.0.weight");
  c.adm_in_channels = label ? (*label)[0] : 0;
  c.validate();
  return c;
}

models::ClipTextConfig clip_config_from_shapes(models::ClipTextConfig c, std::string_view scope,
                                               const ShapeOf& shape_of) {
  const std::string root(scope);
  auto need = [&](const std::string& name) {
    const std::optional<std::array<int64_t, 4>> ne = shape_of(root + name);
    SD_CHECK(ne.has_value(), "[clip] the model has no tensor '%s%s'", root.c_str(), name.c_str());
    return *ne;
  };
  const std::array<int64_t, 4> tokens = need("embeddings.token_embedding.weight");
  c.hidden = tokens[0];
  c.vocab_size = tokens[1];
  c.max_positions = need("embeddings.position_embedding.weight")[1];
  c.intermediate = need("encoder.layers.0.mlp.fc1.weight")[1];
  c.layers = 0;
  while (shape_of(root + "encoder.layers." + std::to_string(c.layers) + ".layer_norm1.weight"))
    ++c.layers;
  // Every CLIP text tower in use has 64-channel heads (ViT-L 12, ViT-H 16, ViT-bigG 20).
  constexpr int64_t kHeadDim = 64;
  SD_CHECK(c.hidden % kHeadDim == 0, "[clip] %s: width %lld is not a multiple of 64", root.c_str(),
           ll(c.hidden));
  c.heads = c.hidden / kHeadDim;
  if (c.projection_dim > 0) c.projection_dim = need("text_projection")[1];
  return c;
}

models::VaeConfig vae_config_from_shapes(models::VaeConfig c, std::string_view scope,
                                         const ShapeOf& shape_of) {
  const std::string root = std::string(scope) + "decoder.";
  const std::optional<std::array<int64_t, 4>> conv_out = shape_of(root + "conv_out.weight");
  SD_CHECK(conv_out.has_value(), "[vae] the model has no tensor '%sconv_out.weight'", root.c_str());
  c.ch = (*conv_out)[2];  // the first level's width, multiplier 1
  c.ch_mult.clear();
  for (int level = 0;; ++level) {
    const std::optional<std::array<int64_t, 4>> conv =
        shape_of(root + "up." + std::to_string(level) + ".block.0.conv2.weight");
    if (!conv) break;
    SD_CHECK((*conv)[3] % c.ch == 0, "[vae] %sup.%d has %lld channels, not a multiple of %lld",
             root.c_str(), level, ll((*conv)[3]), ll(c.ch));
    c.ch_mult.push_back(static_cast<int>((*conv)[3] / c.ch));
  }
  SD_CHECK(!c.ch_mult.empty(), "[vae] the model has no tensor '%sup.0.block.0.conv2.weight'",
           root.c_str());
  int blocks = 0;
  while (shape_of(root + "up.0.block." + std::to_string(blocks) + ".conv1.weight")) ++blocks;
  c.num_res_blocks = blocks - 1;  // the decoder has one more per level than the encoder
  return c;
}

models::VaeConfig wan_vae_config_from_shapes(models::VaeConfig c, std::string_view scope,
                                             const ShapeOf& shape_of) {
  const std::string root(scope);
  auto need = [&](const std::string& name) {
    const std::optional<std::array<int64_t, 4>> ne = shape_of(root + name);
    SD_CHECK(ne.has_value(), "[vae] the Wan autoencoder has no tensor '%s%s'", root.c_str(),
             name.c_str());
    return *ne;
  };
  // Wan 2.2's autoencoder nests each level's residual blocks under one name.
  if (shape_of(root + "decoder.upsamples.0.upsamples.0.residual.0.gamma")) {
    c = models::VaeConfig::wan22();
    c.decoder_ch = need("decoder.head.0.gamma")[3];  // [C, 1, 1, 1]
    if (const auto conv1 = shape_of(root + "encoder.conv1.bias")) c.ch = (*conv1)[0];
  } else {
    c.ch = need("decoder.head.0.gamma")[3];
  }
  c.z_channels = c.embed_dim = need("conv2.bias")[0];
  SD_CHECK(c.latent_mean.empty() || static_cast<int64_t>(c.latent_mean.size()) == c.z_channels,
           "[vae] the Wan autoencoder has %lld latent channels; its statistics are for %zu",
           ll(c.z_channels), c.latent_mean.size());
  return c;
}

models::TaehvConfig taehv_config_from_shapes(std::string_view scope, const ShapeOf& shape_of) {
  const std::string root(scope);
  auto need = [&](const std::string& name) {
    const std::optional<std::array<int64_t, 4>> ne = shape_of(root + name);
    SD_CHECK(ne.has_value(), "[taehv] the tiny video autoencoder has no tensor '%s%s'",
             root.c_str(), name.c_str());
    return *ne;
  };
  // The wide decoder (1x1 and grouped 3x3 convolutions in its memory blocks) is another
  // architecture.
  SD_CHECK(!shape_of(root + "decoder.3.conv.6.weight"),
           "[taehv] this is a wide TAEHV (memory blocks with grouped convolutions), which this "
           "build does not run; use taew2_1 (Wan 2.1 latents) or taew2_2 (Wan 2.2)");
  models::TaehvConfig c;
  // Conv2d weights in engine order: [kw, kh, in, out].
  const std::array<int64_t, 4> first = need("decoder.1.weight");
  c.latent_channels = first[2];
  c.decoder_widths[0] = first[3];
  for (int level = 0; level < models::TaehvConfig::kLevels; ++level) {
    const std::string n = std::to_string(7 + 6 * level);
    const std::array<int64_t, 4> grow = need("decoder." + n + ".conv.weight");
    const auto l = static_cast<size_t>(level);
    SD_CHECK(grow[2] == c.decoder_widths[l] && grow[3] % grow[2] == 0,
             "[taehv] decoder.%s.conv.weight is not a frame-multiplying 1x1 convolution of %lld "
             "channels",
             n.c_str(), ll(c.decoder_widths[l]));
    c.time_upscale[l] = grow[3] / grow[2];
    c.decoder_widths[l + 1] = need("decoder." + std::to_string(8 + 6 * level) + ".weight")[3];
  }
  const int64_t out = need("decoder.22.weight")[3];
  c.patch = out == 3 ? 1 : out == 12 ? 2 : 0;
  SD_CHECK(c.patch > 0,
           "[taehv] the decoder gives %lld channels, not RGB (3) or RGB in 2x2 "
           "patches (12)",
           ll(out));
  if (const auto enc = shape_of(root + "encoder.0.weight")) {
    c.has_encoder = true;
    c.encoder_width = (*enc)[3];
    for (int level = 0; level < models::TaehvConfig::kLevels; ++level) {
      const std::string n = std::to_string(2 + 5 * level);
      const std::array<int64_t, 4> pool = need("encoder." + n + ".conv.weight");
      SD_CHECK(pool[3] == c.encoder_width && pool[2] % pool[3] == 0,
               "[taehv] encoder.%s.conv.weight is not a frame-folding 1x1 convolution to %lld "
               "channels",
               n.c_str(), ll(c.encoder_width));
      c.time_downscale[static_cast<size_t>(level)] = pool[2] / pool[3];
    }
    const int64_t encoded = need("encoder.17.weight")[3];
    SD_CHECK(encoded == c.latent_channels,
             "[taehv] the encoder gives %lld latent channels, the decoder reads %lld", ll(encoded),
             ll(c.latent_channels));
  }
  return c;
}

models::FluxConfig flux_config_from_shapes(models::FluxConfig c, std::string_view scope,
                                           const ShapeOf& shape_of) {
  const std::string root(scope);
  auto need = [&](const std::string& name) {
    const std::optional<std::array<int64_t, 4>> ne = shape_of(root + name);
    SD_CHECK(ne.has_value(), "[flux] the model has no tensor '%s%s'", root.c_str(), name.c_str());
    return *ne;
  };
  const std::array<int64_t, 4> img_in = need("img_in.weight");  // [in, hidden]
  c.in_channels = img_in[0];
  c.hidden = img_in[1];
  c.out_channels = need("final_layer.linear.weight")[1];
  c.context_dim = need("txt_in.weight")[0];
  c.guidance_embed = shape_of(root + "guidance_in.in_layer.weight").has_value();
  // Chroma: the approximator's widths from its projections, its depth from its layers.
  const std::string approximator = "distilled_guidance_layer.";
  c.approximator.depth = 0;
  if (const auto in_proj = shape_of(root + approximator + "in_proj.weight")) {
    c.approximator.in = (*in_proj)[0];
    c.approximator.hidden = (*in_proj)[1];
    while (shape_of(root + approximator + "layers." + std::to_string(c.approximator.depth) +
                    ".in_layer.weight"))
      ++c.approximator.depth;
    SD_CHECK(c.approximator.depth > 0 && c.approximator.in % 4 == 0,
             "[flux] %sdistilled_guidance_layer has %d layers and %lld inputs (Chroma's "
             "approximator needs layers and a multiple of 4 inputs)",
             root.c_str(), c.approximator.depth, ll(c.approximator.in));
    c.vec_dim = 0;
  } else if (c.shared_modulation) {
    // FLUX.2: the shared modulations are the layout; without them a file is FLUX.1's.
    need("double_stream_modulation_img.lin.weight");
    c.vec_dim = 0;
  } else {
    c.vec_dim = need("vector_in.in_layer.weight")[0];
  }
  c.depth = 0;
  while (shape_of(root + "double_blocks." + std::to_string(c.depth) + ".img_attn.qkv.weight"))
    ++c.depth;
  c.depth_single = 0;
  while (shape_of(root + "single_blocks." + std::to_string(c.depth_single) + ".linear1.weight"))
    ++c.depth_single;
  SD_CHECK(c.depth > 0, "[flux] %s: no double_blocks (not a FLUX.1 transformer)", root.c_str());
  const int64_t head_dim =
      c.depth > 0 ? need("double_blocks.0.img_attn.norm.query_norm.scale")[0] : c.head_dim();
  SD_CHECK(head_dim > 0 && c.hidden % head_dim == 0,
           "[flux] width %lld is not a multiple of the %lld-channel heads", ll(c.hidden),
           ll(head_dim));
  c.heads = c.hidden / head_dim;
  c.mlp_hidden = need("double_blocks.0.img_mlp.0.weight")[1] / (c.gated_mlp ? 2 : 1);
  int64_t axes = 0;
  for (int a : c.axes_dim) axes += a;
  SD_CHECK(axes == head_dim,
           "[flux] heads of %lld channels do not match the rotary axes (%lld channels)",
           ll(head_dim), ll(axes));
  return c;
}

models::MmditConfig mmdit_config_from_shapes(models::MmditConfig c, std::string_view scope,
                                             const ShapeOf& shape_of) {
  const std::string root(scope);
  auto need = [&](const std::string& name) {
    const std::optional<std::array<int64_t, 4>> ne = shape_of(root + name);
    SD_CHECK(ne.has_value(), "[mmdit] the model has no tensor '%s%s'", root.c_str(), name.c_str());
    return *ne;
  };
  const std::array<int64_t, 4> proj = need("x_embedder.proj.weight");  // [p, p, in, hidden]
  SD_CHECK(proj[0] == proj[1] && proj[0] > 0, "[mmdit] x_embedder.proj is not a square patch");
  c.patch_size = static_cast<int>(proj[0]);
  c.in_channels = proj[2];
  c.hidden = proj[3];
  const std::array<int64_t, 4> context = need("context_embedder.weight");  // [context, hidden]
  c.context_dim = context[0];
  SD_CHECK(context[1] == c.hidden,
           "[mmdit] context_embedder gives %lld channels, the blocks are %lld wide", ll(context[1]),
           ll(c.hidden));
  c.adm_dim = need("y_embedder.mlp.0.weight")[0];
  c.out_channels = need("final_layer.linear.weight")[1] / (c.patch_size * c.patch_size);
  const int64_t patches = need("pos_embed")[1];
  c.pos_embed_max = 0;
  while ((c.pos_embed_max + 1) * (c.pos_embed_max + 1) <= patches) ++c.pos_embed_max;
  SD_CHECK(c.pos_embed_max * c.pos_embed_max == patches,
           "[mmdit] pos_embed holds %lld patches, not a square grid", ll(patches));
  auto block = [&](int i, const char* name) {
    return root + "joint_blocks." + std::to_string(i) + "." + name;
  };
  c.depth = 0;
  c.x_self_attn_blocks = 0;
  while (shape_of(block(c.depth, "x_block.attn.qkv.weight"))) {
    if (shape_of(block(c.depth, "x_block.attn2.qkv.weight"))) c.x_self_attn_blocks = c.depth + 1;
    ++c.depth;
  }
  SD_CHECK(c.depth > 0, "[mmdit] %s: no joint_blocks (not an SD3 transformer)", root.c_str());
  SD_CHECK(c.hidden % c.depth == 0,
           "[mmdit] width %lld does not split into %d heads (one per joint block)", ll(c.hidden),
           c.depth);
  c.qk_norm = !shape_of(block(0, "x_block.attn.ln_q.weight")) ? models::QkNorm::None
              : shape_of(block(0, "x_block.attn.ln_q.bias"))  ? models::QkNorm::LayerNorm
                                                              : models::QkNorm::Rms;
  c.mlp_ratio = need("joint_blocks.0.x_block.mlp.fc1.weight")[1] / c.hidden;
  return c;
}

models::T5Config t5_config_from_shapes(models::T5Config c, std::string_view scope,
                                       const ShapeOf& shape_of) {
  const std::string root(scope);
  auto need = [&](const std::string& name) {
    const std::optional<std::array<int64_t, 4>> ne = shape_of(root + name);
    SD_CHECK(ne.has_value(), "[t5] the model has no tensor '%s%s'", root.c_str(), name.c_str());
    return *ne;
  };
  const std::array<int64_t, 4> shared = need("shared.weight");  // [d_model, vocab]
  c.model_dim = shared[0];
  c.vocab_size = shared[1];
  const std::string layer0 = "encoder.block.0.layer.";
  c.inner_dim = need(layer0 + "0.SelfAttention.q.weight")[1];
  const std::array<int64_t, 4> bias =
      need(layer0 + "0.SelfAttention.relative_attention_bias.weight");  // [heads, buckets]
  c.heads = bias[0];
  c.relative_buckets = static_cast<int>(bias[1]);
  c.ff_dim = need(layer0 + "1.DenseReluDense.wi_0.weight")[1];
  c.layers = 0;
  while (
      shape_of(root + "encoder.block." + std::to_string(c.layers) + ".layer.0.layer_norm.weight"))
    ++c.layers;
  SD_CHECK(c.heads > 0 && c.inner_dim % c.heads == 0,
           "[t5] %lld heads do not divide the attention width %lld", ll(c.heads), ll(c.inner_dim));
  // umT5 stores a bias table in every block; T5 v1.1 in block 0 only.
  c.bias_per_layer =
      c.layers > 1 &&
      shape_of(root + "encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight");
  return c;
}

}  // namespace sd::pipeline
