#include "pipeline/latent_preview.h"

#include <algorithm>

#include "tensor/error.h"

namespace sd::pipeline {
namespace {

// Least-squares fits of decoded colours to each latent space (community-measured factors,
// the ones stable-diffusion.cpp and ComfyUI's latent formats use; SD3's are Stability AI's,
// from its SD3.5 reference code): rgb = latent . proj + bias.
constexpr float kSdProj[4][3] = {
    {0.337366f, 0.216344f, 0.257386f},
    {0.165636f, 0.386828f, 0.046994f},
    {-0.267803f, 0.237036f, 0.223517f},
    {-0.178022f, -0.200862f, -0.678514f},
};
constexpr float kSdBias[3] = {-0.017478f, -0.055834f, -0.105825f};
constexpr float kSdxlProj[4][3] = {
    {0.258303f, 0.27764f, 0.329699f},
    {-0.299701f, 0.105446f, 0.014194f},
    {0.050522f, 0.186163f, -0.143257f},
    {-0.211938f, -0.149892f, -0.080036f},
};
constexpr float kSdxlBias[3] = {0.144381f, -0.033313f, 0.007061f};
constexpr float kSd3Proj[16][3] = {
    {-0.0645f, 0.0177f, 0.1052f},   {0.0028f, 0.0312f, 0.065f},    {0.1848f, 0.0762f, 0.036f},
    {0.0944f, 0.036f, 0.0889f},     {0.0897f, 0.0506f, -0.0364f},  {-0.002f, 0.1203f, 0.0284f},
    {0.0855f, 0.0118f, 0.0283f},    {-0.0539f, 0.0658f, 0.1047f},  {-0.0057f, 0.0116f, 0.07f},
    {-0.0412f, 0.0281f, -0.0039f},  {0.1106f, 0.1171f, 0.122f},    {-0.0248f, 0.0682f, -0.0481f},
    {0.0815f, 0.0846f, 0.1207f},    {-0.012f, -0.0055f, -0.0867f}, {-0.0749f, -0.0634f, -0.0456f},
    {-0.1418f, -0.1457f, -0.1259f},
};
constexpr float kSd3Bias[3] = {0.0f, 0.0f, 0.0f};
constexpr float kFluxProj[16][3] = {
    {-0.041168f, 0.019917f, 0.097253f},   {0.028096f, 0.02673f, 0.129576f},
    {0.065618f, -0.06795f, -0.014651f},   {-0.012998f, -0.014762f, 0.081251f},
    {0.078567f, 0.059296f, -0.024687f},   {-0.015987f, -0.003697f, 0.005012f},
    {0.033605f, 0.138999f, 0.068517f},    {-0.02445f, -0.063567f, -0.030101f},
    {-0.040194f, -0.01671f, 0.127185f},   {0.112681f, 0.088764f, -0.04194f},
    {-0.023498f, 0.093664f, 0.025543f},   {0.082899f, 0.04832f, 0.007491f},
    {0.075712f, 0.074139f, 0.081965f},    {-0.143501f, 0.018263f, -0.136138f},
    {-0.025767f, -0.082035f, -0.040023f}, {-0.111849f, -0.055589f, -0.032361f},
};
constexpr float kFluxBias[3] = {0.0246f, -0.006937f, -0.008089f};
constexpr float kFlux2Proj[32][3] = {
    {0.000736f, -0.008385f, -0.01971f},  {-0.001352f, -0.016392f, 0.020693f},
    {-0.006376f, 0.002428f, 0.036736f},  {0.039384f, 0.074167f, 0.119789f},
    {0.007464f, -0.005705f, -0.004734f}, {-0.004086f, 0.005287f, -0.000409f},
    {-0.032835f, 0.050802f, -0.02812f},  {-0.003158f, -0.000835f, 0.000406f},
    {-0.11284f, -0.084337f, -0.023083f}, {0.001462f, -0.006656f, 0.000549f},
    {-0.00998f, -0.00748f, 0.009702f},   {0.03254f, 0.000214f, -0.061388f},
    {0.011023f, 0.000694f, 0.007143f},   {-0.001468f, -0.006723f, -0.001678f},
    {-0.005921f, -0.01032f, -0.003907f}, {-0.028434f, 0.027584f, 0.018457f},
    {0.014349f, 0.011523f, 0.000441f},   {0.009874f, 0.003081f, 0.001507f},
    {0.002218f, 0.005712f, 0.001563f},   {0.05301f, -0.019844f, 0.008683f},
    {-0.002507f, 0.005384f, 0.000938f},  {-0.002177f, -0.011366f, 0.003559f},
    {-0.000261f, 0.015121f, -0.00324f},  {-0.003944f, -0.002083f, 0.005043f},
    {-0.009138f, 0.011336f, 0.003781f},  {0.011429f, 0.003985f, -0.003855f},
    {0.010518f, -0.005586f, 0.010131f},  {0.007883f, 0.002912f, -0.001473f},
    {-0.003318f, -0.00316f, 0.003684f},  {-0.03456f, -0.00874f, 0.012996f},
    {0.000166f, 0.001079f, -0.012153f},  {0.017772f, 0.000937f, -0.011953f},
};
constexpr float kFlux2Bias[3] = {-0.028738f, -0.098463f, -0.107619f};
constexpr float kWan21Proj[16][3] = {
    {0.015123f, -0.148418f, 0.479828f},   {0.003652f, -0.01068f, -0.037142f},
    {0.212264f, 0.063033f, 0.016779f},    {0.232999f, 0.406476f, 0.220125f},
    {-0.051864f, -0.082384f, -0.069396f}, {0.085005f, -0.161492f, 0.010689f},
    {-0.245369f, -0.506846f, -0.11701f},  {-0.151145f, 0.017721f, 0.007207f},
    {-0.293239f, -0.207936f, -0.421135f}, {-0.187721f, 0.050783f, 0.177649f},
    {-0.013067f, 0.265964f, 0.166578f},   {0.028327f, 0.109329f, 0.108642f},
    {-0.205343f, 0.043991f, 0.148914f},   {0.014307f, -0.048647f, -0.007219f},
    {0.21715f, 0.053074f, 0.319923f},     {0.155357f, 0.083156f, 0.06478f},
};
constexpr float kWan21Bias[3] = {-0.27027f, -0.234976f, -0.456853f};

constexpr float kWan22Proj[48][3] = {
    {0.017126f, -0.02723f, -0.019257f},   {-0.113739f, -0.028715f, -0.022885f},
    {-0.000106f, 0.021494f, 0.004629f},   {-0.013273f, -0.107137f, -0.033638f},
    {-0.000381f, 0.000279f, 0.025877f},   {-0.014216f, -0.003975f, 0.040528f},
    {0.001638f, -0.000748f, 0.011022f},   {0.029238f, -0.006697f, 0.035933f},
    {0.021641f, -0.015874f, 0.040531f},   {-0.101984f, -0.07016f, -0.028855f},
    {0.033207f, -0.021068f, 0.002663f},   {-0.104711f, 0.121673f, 0.102981f},
    {0.082647f, -0.004991f, 0.057237f},   {-0.027375f, 0.031581f, 0.006868f},
    {-0.045434f, 0.029444f, 0.019287f},   {-0.046572f, -0.012537f, 0.006675f},
    {0.074709f, 0.03369f, 0.025289f},     {-0.008251f, -0.002745f, -0.006999f},
    {0.012685f, -0.061856f, -0.048658f},  {0.042304f, -0.007039f, 0.000295f},
    {-0.007644f, -0.060843f, -0.033142f}, {0.159909f, 0.045628f, 0.367541f},
    {0.095171f, 0.086438f, 0.010271f},    {0.006812f, 0.019643f, 0.029637f},
    {0.003467f, -0.010705f, 0.014252f},   {-0.099681f, -0.066272f, -0.006243f},
    {0.047357f, 0.03704f, 0.000185f},     {-0.041797f, -0.089225f, -0.032257f},
    {0.008928f, 0.017028f, 0.018684f},    {-0.042255f, 0.016045f, 0.006849f},
    {0.011268f, 0.036462f, 0.037387f},    {0.011553f, -0.016375f, -0.048589f},
    {0.046266f, -0.027189f, 0.056979f},   {0.00964f, -0.017576f, 0.030324f},
    {-0.045794f, -0.036083f, -0.010616f}, {0.022418f, 0.039783f, -0.032939f},
    {-0.052714f, -0.015525f, 0.007438f},  {0.193004f, 0.223541f, 0.264175f},
    {-0.059406f, -0.008188f, 0.022867f},  {-0.156742f, -0.263791f, -0.007385f},
    {-0.015717f, 0.01657f, 0.033969f},    {0.037969f, 0.109835f, 0.200449f},
    {-0.000782f, -0.009566f, -0.008058f}, {0.010709f, 0.05296f, -0.044195f},
    {0.017271f, 0.045839f, 0.034569f},    {0.009424f, 0.013088f, -0.001714f},
    {-0.024805f, -0.059378f, -0.033756f}, {-0.078293f, 0.02907f, 0.026129f},
};
constexpr float kWan22Bias[3] = {0.01316f, -0.096492f, -0.071323f};

struct Factors {
  const float (*proj)[3];
  const float* bias;
  int64_t channels;  // rows of proj
  int64_t patch;     // latent channels per colour channel's row: patch x patch positions
};

Factors factors_of(LatentColors colors) {
  switch (colors) {
    case LatentColors::Sd:
      return {kSdProj, kSdBias, 4, 1};
    case LatentColors::Sdxl:
      return {kSdxlProj, kSdxlBias, 4, 1};
    case LatentColors::Sd3:
      return {kSd3Proj, kSd3Bias, 16, 1};
    case LatentColors::Flux:
      return {kFluxProj, kFluxBias, 16, 1};
    case LatentColors::Flux2:
      return {kFlux2Proj, kFlux2Bias, 32, 2};
    case LatentColors::Wan21:
      return {kWan21Proj, kWan21Bias, 16, 1};
    case LatentColors::Wan22:
      return {kWan22Proj, kWan22Bias, 48, 1};
  }
  return {kSdProj, kSdBias, 4, 1};
}

}  // namespace

LatentColors latent_colors_for(LatentColors family_colors, const models::VaeConfig& vae) {
  return vae.arch == models::VaeConfig::Arch::Wan22 ? LatentColors::Wan22 : family_colors;
}

int64_t latent_color_channels(LatentColors colors) {
  const Factors f = factors_of(colors);
  return f.channels * f.patch * f.patch;
}

std::vector<io::Image> project_latent_to_rgb(const std::vector<float>& latent, int64_t w, int64_t h,
                                             int64_t frames, LatentColors colors) {
  const Factors f = factors_of(colors);
  const size_t plane = static_cast<size_t>(w * h);
  const int64_t channels = latent_color_channels(colors);
  SD_CHECK(w > 0 && h > 0 && frames > 0 &&
               latent.size() >= plane * static_cast<size_t>(frames * channels),
           "[preview] a latent of %zu values is not %lldx%lldx%lld frames of %lld channels",
           latent.size(), static_cast<long long>(w), static_cast<long long>(h),
           static_cast<long long>(frames), static_cast<long long>(channels));
  // Channel c of frame t at pixel p: latent[(c * frames + t) * plane + p].
  auto at = [&](int64_t c, int64_t t, size_t p) {
    return latent[(static_cast<size_t>(c * frames + t)) * plane + p];
  };
  std::vector<io::Image> out;
  for (int64_t t = 0; t < frames; ++t) {
    io::Image img;
    img.width = static_cast<int>(w * f.patch);
    img.height = static_cast<int>(h * f.patch);
    img.channels = 3;
    img.pixels.resize(static_cast<size_t>(img.width) * img.height * 3);
    for (int64_t y = 0; y < img.height; ++y)
      for (int64_t x = 0; x < img.width; ++x) {
        const size_t p = static_cast<size_t>((y / f.patch) * w + x / f.patch);
        // A patchified latent keeps a position's values in adjacent channels.
        const int64_t offset = (y % f.patch) * f.patch + x % f.patch;
        float rgb[3] = {f.bias[0], f.bias[1], f.bias[2]};
        for (int64_t d = 0; d < f.channels; ++d) {
          const float v = at(d * f.patch * f.patch + offset, t, p);
          for (int k = 0; k < 3; ++k) rgb[k] += v * f.proj[d][k];
        }
        uint8_t* px = &img.pixels[static_cast<size_t>(y * img.width + x) * 3];
        for (int k = 0; k < 3; ++k)
          px[k] = static_cast<uint8_t>(std::clamp(rgb[k] * 0.5f + 0.5f, 0.0f, 1.0f) * 255);
      }
    out.push_back(std::move(img));
  }
  return out;
}

}  // namespace sd::pipeline
