#include "cli/image_params.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/image_metadata.h"
#include "test_support.h"

namespace sd::cli {
namespace {

Arguments arguments() {
  const char* argv[] = {
      "sd-cli", "-m",  "/models/sd15.safetensors", "-p",     "a cat", "--steps", "4", "-W", "256",
      "-H",     "256", "--sampling-method",        "euler_a"};
  Arguments a = parse_arguments(static_cast<int>(std::size(argv)), argv);
  a.generation.sample_params.scheduler = DISCRETE_SCHEDULER;
  return a;
}

// What main does between parsing and writing, minus the checks that need files: the
// sampler and schedule are resolved to the SD 1.x defaults.
void resolve_defaults_as_main_does(Arguments& a) {
  if (a.generation.sample_params.scheduler == SCHEDULER_COUNT) {
    a.generation.sample_params.scheduler = DISCRETE_SCHEDULER;
  }
  a.generation.prompt_with_lora = a.generation.prompt;
}

TEST(CliImageParams, ReferenceLayout) {
  const Arguments a = arguments();
  const std::string text = image_parameters(a.context, a.generation, 43, Mode::ImgGen);
  const std::string expected_start =
      "a cat\n"
      "Steps: 4, CFG scale: 7.000000, Guidance: 3.500000, Eta: inf, Seed: 43, Size: 256x256, "
      "Model: sd15.safetensors, RNG: cuda, Sampler: euler_a discrete, Version: ";
  EXPECT_EQ(text.substr(0, expected_start.size()), expected_start);
  EXPECT_NE(text.find(", SDCPP: {"), std::string::npos);
  EXPECT_EQ(text.find("Negative prompt"), std::string::npos);  // none given
}

TEST(CliImageParams, OptionalParts) {
  Arguments a = arguments();
  a.generation.negative_prompt = "blurry";
  a.generation.clip_skip = 2;
  a.generation.custom_sigmas = {14.6f, 0.f};
  a.context.sampler_rng_type = CPU_RNG;
  a.context.vae_path = "/vae/ft-mse.safetensors";
  const std::string text = image_parameters(a.context, a.generation, 1, Mode::ImgGen);
  EXPECT_NE(text.find("a cat\nNegative prompt: blurry\nSteps: 4"), std::string::npos) << text;
  EXPECT_NE(text.find("Sampler RNG: cpu, Sampler: euler_a, Custom Sigmas: [14.6000, 0.0000], "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("VAE: ft-mse.safetensors, Clip skip: 2, Version: "), std::string::npos);
}

TEST(CliImageParams, JsonCarriesTheSettings) {
  const Arguments a = arguments();
  const auto j =
      nlohmann::json::parse(image_parameters_json(a.context, a.generation, 43, Mode::ImgGen));
  EXPECT_EQ(j["schema"], "sdcpp.image.params/v1");
  EXPECT_EQ(j["mode"], "img_gen");
  EXPECT_EQ(j["seed"], 43);
  EXPECT_EQ(j["width"], 256);
  EXPECT_EQ(j["prompt"]["positive"], "a cat");
  EXPECT_EQ(j["sampling"]["steps"], 4);
  EXPECT_EQ(j["sampling"]["method"], "euler_a");
  EXPECT_EQ(j["sampling"]["scheduler"], "discrete");
  EXPECT_EQ(j["models"]["model"], "sd15.safetensors");
  EXPECT_EQ(j["rng"], "cuda");
  EXPECT_FALSE(j.contains("sampler_rng"));
  EXPECT_FALSE(j.contains("loras"));
}

// The reference implementation's own image for the same flags: everything but the
// generator's name and version must read the same.
TEST(CliImageParams, MatchesTheReferenceImage) {
  const std::string dir = sd::test::shared_dir();
  if (dir.empty()) GTEST_SKIP() << "no shared reference data";
  const std::string reference =
      io::read_image_metadata(dir + "/golden/sd15_rand/eulera_256.png").parameters;
  ASSERT_FALSE(reference.empty());

  const char* argv[] = {"sd-cli",
                        "-m",
                        "sd15_rand_f16.safetensors",
                        "-p",
                        "a photograph of an astronaut riding a horse",
                        "--seed",
                        "42",
                        "--steps",
                        "4",
                        "-W",
                        "256",
                        "-H",
                        "256",
                        "--sampling-method",
                        "euler_a",
                        "-t",
                        "2"};
  Arguments a = parse_arguments(static_cast<int>(std::size(argv)), argv);
  resolve_defaults_as_main_does(a);
  const std::string ours = image_parameters(a.context, a.generation, 42, Mode::ImgGen);

  const auto head = [](const std::string& s) { return s.substr(0, s.find("Version: ")); };
  EXPECT_EQ(head(ours), head(reference));
  const auto json_of = [](const std::string& s) {
    auto j = nlohmann::json::parse(s.substr(s.find("SDCPP: ") + 7));
    j.erase("generator");
    return j;
  };
  EXPECT_EQ(json_of(ours), json_of(reference));
}

}  // namespace
}  // namespace sd::cli
