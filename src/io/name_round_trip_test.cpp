// Round trips of complete diffusers name lists onto the LDM names (name_conversion.h).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/name_conversion.h"

namespace sd::io {
namespace {

// ---------------------------------------------------------------------------------------
// Round trips: complete name lists of one model in both spellings, each generated from
// the published block structure by walking it the way its own code does (diffusers'
// nested blocks, LDM's flat counters), so the test does not share the mapping's formulas.

struct UnetConfig {
  int levels;
  std::vector<int> mult;   // channel multiplier per level
  std::vector<int> depth;  // transformer blocks per level (0: no attention)
  int mid_depth;
  bool label_emb;
};
// SD1.5 (v1-inference.yaml) and SDXL base (sd_xl_base.yaml).
const UnetConfig kSd15{4, {1, 2, 4, 4}, {1, 1, 1, 0}, 1, false};
const UnetConfig kSdxl{3, {1, 2, 4}, {0, 2, 10}, 10, true};

void add_wb(std::vector<std::string>& out, const std::string& p) {
  out.push_back(p + "weight");
  out.push_back(p + "bias");
}

void add_transformer(std::vector<std::string>& out, const std::string& p, int depth) {
  add_wb(out, p + "norm.");
  add_wb(out, p + "proj_in.");
  for (int k = 0; k < depth; ++k) {
    std::string b = p + "transformer_blocks." + std::to_string(k) + ".";
    for (const char* a : {"attn1.", "attn2."}) {
      for (const char* qkv : {"to_q.", "to_k.", "to_v."}) out.push_back(b + a + qkv + "weight");
      add_wb(out, b + a + "to_out.0.");
    }
    add_wb(out, b + "ff.net.0.proj.");
    add_wb(out, b + "ff.net.2.");
    for (const char* n : {"norm1.", "norm2.", "norm3."}) add_wb(out, b + n);
  }
  add_wb(out, p + "proj_out.");
}

std::vector<std::string> diffusers_unet_names(const UnetConfig& c) {
  std::vector<std::string> out;
  auto resnet = [&](const std::string& p, bool shortcut) {
    for (const char* m : {"norm1.", "conv1.", "time_emb_proj.", "norm2.", "conv2."}) {
      add_wb(out, p + m);
    }
    if (shortcut) add_wb(out, p + "conv_shortcut.");
  };
  add_wb(out, "conv_in.");
  add_wb(out, "time_embedding.linear_1.");
  add_wb(out, "time_embedding.linear_2.");
  if (c.label_emb) {
    add_wb(out, "add_embedding.linear_1.");
    add_wb(out, "add_embedding.linear_2.");
  }
  int ch = c.mult[0];
  for (int i = 0; i < c.levels; ++i) {
    std::string p = "down_blocks." + std::to_string(i) + ".";
    for (int j = 0; j < 2; ++j) {
      resnet(p + "resnets." + std::to_string(j) + ".", j == 0 && ch != c.mult[i]);
      if (c.depth[i]) add_transformer(out, p + "attentions." + std::to_string(j) + ".", c.depth[i]);
    }
    ch = c.mult[i];
    if (i + 1 < c.levels) add_wb(out, p + "downsamplers.0.conv.");
  }
  resnet("mid_block.resnets.0.", false);
  add_transformer(out, "mid_block.attentions.0.", c.mid_depth);
  resnet("mid_block.resnets.1.", false);
  for (int u = 0; u < c.levels; ++u) {
    int level = c.levels - 1 - u;
    std::string p = "up_blocks." + std::to_string(u) + ".";
    for (int j = 0; j < 3; ++j) {
      resnet(p + "resnets." + std::to_string(j) + ".", true);  // skip input widens them all
      if (c.depth[level]) {
        add_transformer(out, p + "attentions." + std::to_string(j) + ".", c.depth[level]);
      }
    }
    if (level > 0) add_wb(out, p + "upsamplers.0.conv.");
  }
  add_wb(out, "conv_norm_out.");
  add_wb(out, "conv_out.");
  return out;
}

std::vector<std::string> ldm_unet_names(const UnetConfig& c) {
  std::vector<std::string> out;
  const std::string root = "model.diffusion_model.";
  auto resblock = [&](const std::string& p, bool skip) {
    for (const char* m :
         {"in_layers.0.", "in_layers.2.", "emb_layers.1.", "out_layers.0.", "out_layers.3."}) {
      add_wb(out, p + m);
    }
    if (skip) add_wb(out, p + "skip_connection.");
  };
  add_wb(out, root + "time_embed.0.");
  add_wb(out, root + "time_embed.2.");
  if (c.label_emb) {
    add_wb(out, root + "label_emb.0.0.");
    add_wb(out, root + "label_emb.0.2.");
  }
  int block = 0;
  add_wb(out, root + "input_blocks.0.0.");
  int ch = c.mult[0];
  for (int level = 0; level < c.levels; ++level) {
    for (int r = 0; r < 2; ++r) {
      std::string p = root + "input_blocks." + std::to_string(++block) + ".";
      resblock(p + "0.", ch != c.mult[level]);
      ch = c.mult[level];
      if (c.depth[level]) add_transformer(out, p + "1.", c.depth[level]);
    }
    if (level + 1 < c.levels)
      add_wb(out, root + "input_blocks." + std::to_string(++block) + ".0.op.");
  }
  resblock(root + "middle_block.0.", false);
  add_transformer(out, root + "middle_block.1.", c.mid_depth);
  resblock(root + "middle_block.2.", false);
  block = 0;
  for (int level = c.levels - 1; level >= 0; --level) {
    for (int r = 0; r < 3; ++r, ++block) {
      std::string p = root + "output_blocks." + std::to_string(block) + ".";
      resblock(p + "0.", true);
      int layer = 1;
      if (c.depth[level]) add_transformer(out, p + std::to_string(layer++) + ".", c.depth[level]);
      if (level > 0 && r == 2) add_wb(out, p + std::to_string(layer) + ".conv.");
    }
  }
  add_wb(out, root + "out.0.");
  add_wb(out, root + "out.2.");
  return out;
}

// Maps every name and checks the result is one-to-one and exactly `expected`.
void expect_bijection(const std::vector<std::string>& from, SourceLayout layout,
                      const std::vector<std::string>& expected) {
  std::map<std::string, std::string> seen;  // canonical -> source
  for (const std::string& n : from) {
    NameMapping m = convert_name(n, layout, "");
    EXPECT_TRUE(m.known) << n;
    auto [it, fresh] = seen.emplace(m.name, n);
    EXPECT_TRUE(fresh) << n << " and " << it->second << " both map to " << m.name;
  }
  std::set<std::string> got, want(expected.begin(), expected.end());
  for (const auto& kv : seen) got.insert(kv.first);
  EXPECT_EQ(want.size(), expected.size()) << "the expected list repeats a name";
  std::vector<std::string> missing, extra;
  for (const std::string& n : want) {
    if (!got.count(n)) missing.push_back(n);
  }
  for (const std::string& n : got) {
    if (!want.count(n)) extra.push_back(n);
  }
  EXPECT_TRUE(missing.empty()) << missing.size() << " missing, e.g. " << missing.front();
  EXPECT_TRUE(extra.empty()) << extra.size() << " unexpected, e.g. " << extra.front();
}

TEST(NameConversion, Sd15UnetRoundTrip) {
  std::vector<std::string> diffusers = diffusers_unet_names(kSd15);
  EXPECT_EQ(diffusers.size(), 686u);  // tensors in SD1.5's unet/ (and model.diffusion_model.*)
  expect_bijection(diffusers, SourceLayout::DiffusersUnet, ldm_unet_names(kSd15));
}

TEST(NameConversion, SdxlUnetRoundTrip) {
  std::vector<std::string> diffusers = diffusers_unet_names(kSdxl);
  EXPECT_EQ(diffusers.size(), 1680u);  // tensors in SDXL base's unet/
  expect_bijection(diffusers, SourceLayout::DiffusersUnetXl, ldm_unet_names(kSdxl));
}

// SD's AutoencoderKL (ch 128, ch_mult 1,2,4,4, 2 res blocks): diffusers' names and LDM's.
std::vector<std::string> diffusers_vae_names() {
  const int mult[4] = {1, 2, 4, 4};
  std::vector<std::string> out;
  auto resnet = [&](const std::string& p, bool shortcut) {
    for (const char* m : {"norm1.", "conv1.", "norm2.", "conv2."}) add_wb(out, p + m);
    if (shortcut) add_wb(out, p + "conv_shortcut.");
  };
  auto mid = [&](const std::string& p) {
    resnet(p + "mid_block.resnets.0.", false);
    for (const char* m : {"group_norm.", "to_q.", "to_k.", "to_v.", "to_out.0."}) {
      add_wb(out, p + "mid_block.attentions.0." + m);
    }
    resnet(p + "mid_block.resnets.1.", false);
  };
  add_wb(out, "encoder.conv_in.");
  int ch = 1;
  for (int i = 0; i < 4; ++i) {
    std::string p = "encoder.down_blocks." + std::to_string(i) + ".";
    for (int j = 0; j < 2; ++j) {
      resnet(p + "resnets." + std::to_string(j) + ".", j == 0 && ch != mult[i]);
      ch = mult[i];
    }
    if (i < 3) add_wb(out, p + "downsamplers.0.conv.");
  }
  mid("encoder.");
  add_wb(out, "encoder.conv_norm_out.");
  add_wb(out, "encoder.conv_out.");
  add_wb(out, "quant_conv.");
  add_wb(out, "post_quant_conv.");
  add_wb(out, "decoder.conv_in.");
  mid("decoder.");
  ch = mult[3];
  for (int u = 0; u < 4; ++u) {
    int level = 3 - u;
    std::string p = "decoder.up_blocks." + std::to_string(u) + ".";
    for (int j = 0; j < 3; ++j) {
      resnet(p + "resnets." + std::to_string(j) + ".", j == 0 && ch != mult[level]);
      ch = mult[level];
    }
    if (level > 0) add_wb(out, p + "upsamplers.0.conv.");
  }
  add_wb(out, "decoder.conv_norm_out.");
  add_wb(out, "decoder.conv_out.");
  return out;
}

std::vector<std::string> ldm_vae_names() {
  const int mult[4] = {1, 2, 4, 4};
  const std::string r = "first_stage_model.";
  std::vector<std::string> out;
  auto block = [&](const std::string& p, bool shortcut) {
    for (const char* m : {"norm1.", "conv1.", "norm2.", "conv2."}) add_wb(out, p + m);
    if (shortcut) add_wb(out, p + "nin_shortcut.");
  };
  auto mid = [&](const std::string& p) {
    block(p + "mid.block_1.", false);
    for (const char* m : {"norm.", "q.", "k.", "v.", "proj_out."})
      add_wb(out, p + "mid.attn_1." + m);
    block(p + "mid.block_2.", false);
  };
  add_wb(out, r + "encoder.conv_in.");
  int ch = 1;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) {
      block(r + "encoder.down." + std::to_string(i) + ".block." + std::to_string(j) + ".",
            ch != mult[i]);
      ch = mult[i];
    }
    if (i != 3) add_wb(out, r + "encoder.down." + std::to_string(i) + ".downsample.conv.");
  }
  mid(r + "encoder.");
  add_wb(out, r + "encoder.norm_out.");
  add_wb(out, r + "encoder.conv_out.");
  add_wb(out, r + "quant_conv.");
  add_wb(out, r + "post_quant_conv.");
  add_wb(out, r + "decoder.conv_in.");
  mid(r + "decoder.");
  ch = mult[3];
  for (int i = 3; i >= 0; --i) {  // taming's Decoder builds its levels from the deepest
    for (int j = 0; j < 3; ++j) {
      block(r + "decoder.up." + std::to_string(i) + ".block." + std::to_string(j) + ".",
            ch != mult[i]);
      ch = mult[i];
    }
    if (i != 0) add_wb(out, r + "decoder.up." + std::to_string(i) + ".upsample.conv.");
  }
  add_wb(out, r + "decoder.norm_out.");
  add_wb(out, r + "decoder.conv_out.");
  return out;
}

TEST(NameConversion, Sd15VaeRoundTrip) {
  std::vector<std::string> diffusers = diffusers_vae_names();
  EXPECT_EQ(diffusers.size(), 248u);  // first_stage_model.* tensors of SD1.5
  expect_bijection(diffusers, SourceLayout::DiffusersVae, ldm_vae_names());
}

TEST(NameConversion, OpenClipAndTransformersAgree) {
  // One encoder layer plus the embeddings, in OpenCLIP (SDXL checkpoint) and in HF
  // (text_encoder_2/) spelling, must land on the same canonical names.
  std::vector<std::string> open_clip, hf;
  for (const char* m : {"ln_1.", "ln_2.", "mlp.c_fc.", "mlp.c_proj.", "attn.out_proj."}) {
    add_wb(open_clip, std::string("conditioner.embedders.1.model.transformer.resblocks.4.") + m);
  }
  for (const char* m :
       {"layer_norm1.", "layer_norm2.", "mlp.fc1.", "mlp.fc2.", "self_attn.out_proj."}) {
    add_wb(hf, std::string("text_model.encoder.layers.4.") + m);
  }
  open_clip.push_back("conditioner.embedders.1.model.token_embedding.weight");
  hf.push_back("text_model.embeddings.token_embedding.weight");
  add_wb(open_clip, "conditioner.embedders.1.model.ln_final.");
  add_wb(hf, "text_model.final_layer_norm.");
  ASSERT_EQ(open_clip.size(), hf.size());
  for (size_t i = 0; i < hf.size(); ++i) {
    EXPECT_EQ(to_canonical(open_clip[i], SourceLayout::Ldm, ""),
              to_canonical(hf[i], SourceLayout::HfTransformers, kTextEncoder2Root))
        << open_clip[i];
  }
}

}  // namespace
}  // namespace sd::io
