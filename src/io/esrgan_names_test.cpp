#include "io/esrgan_names.h"

#include <gtest/gtest.h>

namespace sd::io {
namespace {

using Names = std::map<std::string, std::string>;

TEST(EsrganNames, RealEsrganNamesAreKept) {
  const Names got = esrgan_tensor_names({"conv_first.weight", "body.0.rdb1.conv1.bias"});
  EXPECT_EQ(got, (Names{{"conv_first.weight", "conv_first.weight"},
                        {"body.0.rdb1.conv1.bias", "body.0.rdb1.conv1.bias"}}));
}

TEST(EsrganNames, TrainingCheckpointsUseTheEmaWeights) {
  const Names got = esrgan_tensor_names(
      {"params.conv_first.weight", "params_ema.conv_first.weight", "params_ema.conv_hr.bias"});
  EXPECT_EQ(got, (Names{{"conv_first.weight", "params_ema.conv_first.weight"},
                        {"conv_hr.bias", "params_ema.conv_hr.bias"}}));
  EXPECT_EQ(esrgan_tensor_names({"params.conv_last.weight"}),
            (Names{{"conv_last.weight", "params.conv_last.weight"}}));
  EXPECT_EQ(esrgan_tensor_names({"module.conv_last.weight"}),
            (Names{{"conv_last.weight", "module.conv_last.weight"}}));
}

TEST(EsrganNames, OriginalEsrganSequentialIndices) {
  // x4: two upsampling convs (3, 6), HR conv 8, last conv 10.
  const Names x4 =
      esrgan_tensor_names({"model.0.weight", "model.1.sub.0.RDB1.conv1.0.weight",
                           "model.1.sub.12.RDB3.conv5.0.bias", "model.1.sub.23.weight",
                           "model.3.weight", "model.6.bias", "model.8.weight", "model.10.bias"});
  EXPECT_EQ(x4, (Names{{"conv_first.weight", "model.0.weight"},
                       {"body.0.rdb1.conv1.weight", "model.1.sub.0.RDB1.conv1.0.weight"},
                       {"body.12.rdb3.conv5.bias", "model.1.sub.12.RDB3.conv5.0.bias"},
                       {"conv_body.weight", "model.1.sub.23.weight"},
                       {"conv_up1.weight", "model.3.weight"},
                       {"conv_up2.bias", "model.6.bias"},
                       {"conv_hr.weight", "model.8.weight"},
                       {"conv_last.bias", "model.10.bias"}}));
  // x2: one upsampling conv (3), HR 5, last 7; x1: HR 2, last 4.
  const Names x2 = esrgan_tensor_names({"model.3.weight", "model.5.weight", "model.7.weight"});
  EXPECT_EQ(x2, (Names{{"conv_up1.weight", "model.3.weight"},
                       {"conv_hr.weight", "model.5.weight"},
                       {"conv_last.weight", "model.7.weight"}}));
  const Names x1 = esrgan_tensor_names({"model.2.weight", "model.4.weight"});
  EXPECT_EQ(x1,
            (Names{{"conv_hr.weight", "model.2.weight"}, {"conv_last.weight", "model.4.weight"}}));
}

TEST(EsrganNames, OddNamesAreIgnoredNotMisread) {
  const Names got = esrgan_tensor_names(
      {"model.1.sub.x.weight", "model.1.sub.0.RDB1.conv1.weight", "model.99999999.weight"});
  EXPECT_TRUE(got.empty());
}

}  // namespace
}  // namespace sd::io
