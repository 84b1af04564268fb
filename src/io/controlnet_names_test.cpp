#include "io/controlnet_names.h"

#include <gtest/gtest.h>

namespace sd::io {
namespace {

TEST(ControlNetNames, OriginalBareAndDiffusersNamesMeet) {
  // The original layout, with and without its prefix.
  EXPECT_EQ(controlnet_name("control_model.input_hint_block.14.weight"),
            "control_model.input_hint_block.14.weight");
  EXPECT_EQ(controlnet_name("zero_convs.3.0.bias"), "control_model.zero_convs.3.0.bias");
  // diffusers: the encoder as the loader names a diffusers UNet's, the rest here.
  EXPECT_EQ(controlnet_name("model.diffusion_model.input_blocks.1.0.in_layers.0.weight"),
            "control_model.input_blocks.1.0.in_layers.0.weight");
  EXPECT_EQ(controlnet_name("model.diffusion_model.controlnet_cond_embedding.conv_in.weight"),
            "control_model.input_hint_block.0.weight");
  EXPECT_EQ(controlnet_name("controlnet_cond_embedding.blocks.5.bias"),
            "control_model.input_hint_block.12.bias");
  EXPECT_EQ(controlnet_name("controlnet_cond_embedding.conv_out.weight"),
            "control_model.input_hint_block.14.weight");
  EXPECT_EQ(controlnet_name("model.diffusion_model.controlnet_down_blocks.11.weight"),
            "control_model.zero_convs.11.0.weight");
  EXPECT_EQ(controlnet_name("controlnet_mid_block.bias"), "control_model.middle_block_out.0.bias");
}

}  // namespace
}  // namespace sd::io
