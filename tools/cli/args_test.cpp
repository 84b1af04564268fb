// sd-cli's flags: sd.cpp's names and defaults, strict values, and the checks made before a
// model is loaded.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "cli/args.h"
#include "io/io_test_util.h"
#include "tensor/error.h"

namespace sd::cli {
namespace {

Arguments parse(const std::vector<const char*>& flags) {
  std::vector<const char*> argv = {"sd-cli"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return parse_arguments(static_cast<int>(argv.size()), argv.data());
}

Arguments parse(std::initializer_list<const char*> flags) {
  return parse(std::vector<const char*>(flags));
}

std::string parse_error(std::initializer_list<const char*> flags) {
  try {
    Arguments a = parse(flags);
    resolve_and_validate(a);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A file that exists, for flags whose files are checked.
const std::string& existing_file() {
  static const std::string path = [] {
    static const io::test::TempDir dir;
    const std::string p = dir.file("model.safetensors");
    std::ofstream(p) << "x";
    return p;
  }();
  return path;
}

TEST(CliArgs, DefaultsAreTheReferenceCli) {
  const Arguments a = parse({});
  EXPECT_EQ(a.cli.mode, Mode::ImgGen);
  EXPECT_EQ(a.cli.output_path, "output.png");
  EXPECT_EQ(a.generation.seed, 42);
  EXPECT_EQ(a.generation.width, -1);
  EXPECT_EQ(a.generation.resolved_width(), 512);
  EXPECT_EQ(a.generation.strength, 0.75f);
  EXPECT_EQ(a.generation.sample_params.sample_steps, 20);
  EXPECT_EQ(a.generation.sample_params.guidance.txt_cfg, 7.0f);
  EXPECT_EQ(a.generation.sample_params.sample_method, SAMPLE_METHOD_COUNT);
  EXPECT_EQ(a.context.rng_type, CUDA_RNG);
  EXPECT_EQ(a.context.n_threads, -1);
  EXPECT_EQ(a.context.lora_model_dir, ".");
  EXPECT_TRUE(a.generation.embed_image_metadata);
}

TEST(CliArgs, FlagsReachTheirFields) {
  const Arguments a = parse({"-m",
                             "m.safetensors",
                             "-p",
                             "a cat",
                             "-n",
                             "blurry",
                             "-W",
                             "256",
                             "-H",
                             "320",
                             "--steps",
                             "4",
                             "--cfg-scale",
                             "5.5",
                             "-s",
                             "-1",
                             "--sampling-method",
                             "euler",
                             "--scheduler",
                             "karras",
                             "--rng",
                             "cpu",
                             "--sampler-rng",
                             "std_default",
                             "-b",
                             "3",
                             "--clip-skip",
                             "2",
                             "--vae-tiling",
                             "--vae-tile-size",
                             "64x32",
                             "--prediction",
                             "v",
                             "--type",
                             "q8_0",
                             "-t",
                             "3",
                             "-o",
                             "out_%03d.png",
                             "-M",
                             "img_gen",
                             "--disable-image-metadata",
                             "--eta",
                             "0.5",
                             "--timestep-shift",
                             "250",
                             "-i",
                             "init.png",
                             "--mask",
                             "mask.png",
                             "--strength",
                             "0.4"});
  EXPECT_EQ(a.context.model_path, "m.safetensors");
  EXPECT_EQ(a.generation.prompt, "a cat");
  EXPECT_EQ(a.generation.negative_prompt, "blurry");
  EXPECT_EQ(a.generation.width, 256);
  EXPECT_EQ(a.generation.height, 320);
  EXPECT_EQ(a.generation.sample_params.sample_steps, 4);
  EXPECT_EQ(a.generation.sample_params.guidance.txt_cfg, 5.5f);
  EXPECT_EQ(a.generation.seed, -1);
  EXPECT_EQ(a.generation.sample_params.sample_method, EULER_SAMPLE_METHOD);
  EXPECT_EQ(a.generation.sample_params.scheduler, KARRAS_SCHEDULER);
  EXPECT_EQ(a.context.rng_type, CPU_RNG);
  EXPECT_EQ(a.context.sampler_rng_type, STD_DEFAULT_RNG);
  EXPECT_EQ(a.generation.batch_count, 3);
  EXPECT_EQ(a.generation.clip_skip, 2);
  EXPECT_TRUE(a.generation.vae_tiling_params.enabled);
  EXPECT_EQ(a.generation.vae_tiling_params.tile_size_x, 64);
  EXPECT_EQ(a.generation.vae_tiling_params.tile_size_y, 32);
  EXPECT_EQ(a.context.prediction, V_PRED);
  EXPECT_EQ(a.context.wtype, SD_TYPE_Q8_0);
  EXPECT_EQ(a.context.n_threads, 3);
  EXPECT_EQ(a.cli.output_path, "out_%03d.png");
  EXPECT_FALSE(a.generation.embed_image_metadata);
  EXPECT_EQ(a.generation.sample_params.eta, 0.5f);
  EXPECT_EQ(a.generation.sample_params.shifted_timestep, 250);
  EXPECT_EQ(a.generation.init_image_path, "init.png");
  EXPECT_EQ(a.generation.mask_image_path, "mask.png");
  EXPECT_EQ(a.generation.strength, 0.4f);
}

TEST(CliArgs, ListFlagsAccumulate) {
  const Arguments a =
      parse({"--backend", "te=cpu", "--backend", "vae=cpu", "--sigmas", "[14.6, 7.8]", "--sigmas",
             "0", "-r", "a.png", "-r", "b.png", "--skip-layers", "[1, 2,3]"});
  EXPECT_EQ(a.context.backend, "te=cpu,vae=cpu");
  EXPECT_EQ(a.generation.custom_sigmas, (std::vector<float>{14.6f, 7.8f, 0.f}));
  EXPECT_EQ(a.generation.ref_image_paths, (std::vector<std::string>{"a.png", "b.png"}));
  EXPECT_EQ(a.generation.skip_layers, (std::vector<int>{1, 2, 3}));
}

TEST(CliArgs, AnswersStopParsing) {
  EXPECT_TRUE(parse({"-h", "--no-such-flag"}).cli.help);
  EXPECT_TRUE(parse({"--version"}).cli.version);
  EXPECT_TRUE(parse({"--list-devices"}).cli.list_devices);
}

TEST(CliArgs, BadInputNamesTheFlag) {
  EXPECT_NE(parse_error({"--bogus"}).find("unknown argument: --bogus"), std::string::npos);
  EXPECT_NE(parse_error({"--steps"}).find("missing value for --steps"), std::string::npos);
  EXPECT_NE(parse_error({"--steps", "2x"}).find("--steps takes a whole number, got '2x'"),
            std::string::npos);
  EXPECT_NE(parse_error({"--cfg-scale", "high"}).find("--cfg-scale takes a number"),
            std::string::npos);
  EXPECT_NE(parse_error({"-s", "seed"}).find("--seed takes a whole number"), std::string::npos);
  EXPECT_NE(parse_error({"--skip-layers", "7,8"}).find("bracketed list"), std::string::npos);
  const std::string sampler = parse_error({"--sampling-method", "eulerx"});
  EXPECT_NE(sampler.find("unknown sampling method 'eulerx'"), std::string::npos);
  EXPECT_NE(sampler.find("euler_a, heun"), std::string::npos) << sampler;
  EXPECT_NE(parse_error({"--scheduler", "x"}).find("karras"), std::string::npos);
  EXPECT_NE(parse_error({"--rng", "x"}).find("std_default, cuda, cpu"), std::string::npos);
  EXPECT_NE(parse_error({"--type", "q9_9"}).find("unknown type 'q9_9'"), std::string::npos);
  EXPECT_NE(parse_error({"-M", "paint"}).find("valid modes: img_gen"), std::string::npos);
  EXPECT_NE(parse_error({"--preview", "x"}).find("none, proj, tae, vae"), std::string::npos);
}

TEST(CliArgs, TypeNamesIgnoreCase) {
  EXPECT_EQ(parse({"--type", "q4_K"}).context.wtype, SD_TYPE_Q4_K);
  EXPECT_EQ(parse({"--type", "Q4_K"}).context.wtype, SD_TYPE_Q4_K);
  EXPECT_EQ(parse({"--type", "F16"}).context.wtype, SD_TYPE_F16);
}

TEST(CliValidate, ChecksBeforeLoading) {
  const char* m = existing_file().c_str();
  EXPECT_EQ(parse_error({"-m", m}), "");
  EXPECT_NE(parse_error({"-p", "x"}).find("no model given"), std::string::npos);
  EXPECT_NE(parse_error({"-m", "/no/such/model.safetensors"}).find("does not exist"),
            std::string::npos);
  EXPECT_EQ(parse_error({"-m", m, "-W", "500"}),
            "--width 500 is not a multiple of 8; use 496 or 504");
  EXPECT_NE(parse_error({"-m", m, "-H", "4"}).find("--height 4 is not a multiple of 8"),
            std::string::npos);
  EXPECT_EQ(parse_error({"-m", m, "-W", "0"}),
            "--width must be a positive number of pixels (a multiple of 8), got 0");
  EXPECT_NE(parse_error({"-m", m, "-H", "-64"}).find("--height must be a positive"),
            std::string::npos);
  EXPECT_NE(parse_error({"-m", m, "--strength", "1.5"}).find("--strength must be in [0, 1]"),
            std::string::npos);
  EXPECT_NE(parse_error({"-m", m, "--strength", "-0.1"}).find("--strength"), std::string::npos);
  EXPECT_NE(parse_error({"-m", m, "--steps", "0"}).find("--steps must be at least 1"),
            std::string::npos);
  EXPECT_NE(parse_error({"-m", m, "-b", "0"}).find("--batch-count"), std::string::npos);
  EXPECT_NE(parse_error({"-m", m, "--cfg-scale", "-1"}).find("--cfg-scale"), std::string::npos);
  EXPECT_NE(parse_error({"-m", m, "--timestep-shift", "1001"}).find("[0, 1000]"),
            std::string::npos);
  EXPECT_NE(parse_error({"-m", m, "-i", "/no/such/init.png"}).find("--init-img"),
            std::string::npos);
  EXPECT_NE(parse_error({"-m", m, "--vae-format", "xl"}).find("--vae-format"), std::string::npos);
  EXPECT_NE(parse_error({"-M", "metadata"}).find("--image FILE"), std::string::npos);
  EXPECT_NE(parse_error({"-M", "convert"}).find("convert needs an input model"), std::string::npos);
  EXPECT_NE(parse_error({"-M", "upscale", "-i", m}).find("--upscale-model"), std::string::npos);
  EXPECT_EQ(parse_error({"-m", m, "--extra-sample-args", "apg_eta=abc"}),
            "--extra-sample-args apg_eta=abc: 'abc' is not a number");
  EXPECT_NE(parse_error({"-m", m, "--extra-sample-args", "apg_eta"}).find("not key=value"),
            std::string::npos);
  EXPECT_EQ(parse_error({"-m", m, "--extra-sample-args", "apg_eta=0.5,beta_alpha=0.6"}), "");
}

TEST(CliValidate, ResolvesDependentDefaults) {
  Arguments a = parse({"-m", existing_file().c_str(), "-t", "0", "-s", "-5", "--clip-on-cpu",
                       "--vae-on-cpu", "--backend", "diffusion=cpu", "--offload-to-cpu"});
  resolve_and_validate(a);
  EXPECT_GE(a.context.n_threads, 1);
  EXPECT_GE(a.generation.seed, 0);  // random
  EXPECT_EQ(a.context.effective_backend, "vae=cpu,te=cpu,diffusion=cpu");
  EXPECT_EQ(a.context.effective_params_backend, "*=cpu");

  Arguments convert = parse({"-M", "convert", "-m", existing_file().c_str()});
  resolve_and_validate(convert);
  EXPECT_EQ(convert.cli.output_path, "output.gguf");
}

TEST(CliValidate, LoraTagsLeaveThePrompt) {
  namespace fs = std::filesystem;
  const io::test::TempDir temp;
  const fs::path dir = temp.path();
  std::ofstream(dir / "style.safetensors") << "x";
  Arguments a = parse({"-m", existing_file().c_str(), "--lora-model-dir", dir.c_str(), "-p",
                       "a cat<lora:style:0.5> sitting<lora:missing:1>"});
  resolve_and_validate(a);
  EXPECT_EQ(a.generation.prompt, "a cat sitting");
  EXPECT_EQ(a.generation.prompt_with_lora, "a cat<lora:style:0.5> sitting<lora:missing:1>");
  ASSERT_EQ(a.generation.lora_map.size(), 1u);
  EXPECT_EQ(a.generation.lora_map.begin()->first, (dir / "style.safetensors").string());
  EXPECT_EQ(a.generation.lora_map.begin()->second, 0.5f);
  const sd_img_gen_params_t p = a.generation.to_c_params();
  ASSERT_EQ(p.lora_count, 1u);
  EXPECT_FALSE(p.loras[0].is_high_noise);
  EXPECT_STREQ(p.prompt, "a cat sitting");
  fs::remove_all(dir);
}

TEST(CliValidate, ConfinedLoraTagsStayInTheirFolder) {
  namespace fs = std::filesystem;
  const io::test::TempDir temp;
  const fs::path dir = temp.path() / "lora";
  fs::create_directories(dir);
  fs::create_directories(temp.path() / "private");
  std::ofstream(dir / "style.safetensors") << "x";
  std::ofstream(temp.path() / "private" / "secret.safetensors") << "x";
  fs::create_symlink(temp.path() / "private" / "secret.safetensors", dir / "link.safetensors");
  auto run = [&](const std::string& prompt, bool confined) {
    std::vector<const char*> args = {"-m", existing_file().c_str(), "--lora-model-dir", dir.c_str(),
                                     "-p", prompt.c_str()};
    if (confined) args.push_back("--confine-model-dirs");
    Arguments a = parse(args);
    resolve_and_validate(a);
    return a.generation.lora_map.size();
  };
  // The reference's behaviour by default: tags may name files anywhere.
  EXPECT_EQ(run("x<lora:../private/secret:1>", false), 1u);
  EXPECT_EQ(run("x<lora:link:1>", false), 1u);
  EXPECT_EQ(run("x<lora:style:1>", true), 1u);
  const std::vector<std::string> refused = {"../private/secret", "link",
                                            (temp.path() / "private" / "secret").string()};
  for (const std::string& tag : refused) {
    try {
      run("x<lora:" + tag + ":1>", true);
      ADD_FAILURE() << tag << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is refused"), std::string::npos) << e.what();
    }
  }
}

TEST(CliValidate, CParamsViewTheOptions) {
  Arguments a =
      parse({"-m", existing_file().c_str(), "-p", "x", "-W", "256", "--circular", "--skip-layers",
             "[4]", "--sigmas", "1,0", "--taesd", existing_file().c_str()});
  resolve_and_validate(a);
  const sd_ctx_params_t c = a.context.to_c_params(true);
  EXPECT_STREQ(c.model_path, existing_file().c_str());
  EXPECT_STREQ(c.taesd_path, existing_file().c_str());
  EXPECT_TRUE(c.tae_preview_only);
  EXPECT_EQ(c.vae_format, SD_VAE_FORMAT_AUTO);
  EXPECT_EQ(c.model_args, nullptr);
  const sd_img_gen_params_t g = a.generation.to_c_params();
  EXPECT_EQ(g.width, 256);
  EXPECT_EQ(g.height, 512);  // -H not given
  EXPECT_EQ(g.seed, 42);
  EXPECT_TRUE(g.circular_x && g.circular_y);
  ASSERT_EQ(g.sample_params.guidance.slg.layer_count, 1u);
  EXPECT_EQ(g.sample_params.guidance.slg.layers[0], 4);
  ASSERT_EQ(g.sample_params.custom_sigmas_count, 2);
  EXPECT_EQ(g.sample_params.custom_sigmas[0], 1.f);
  EXPECT_EQ(g.hires.enabled, false);
}

TEST(CliValidate, HiresFlagsReachTheCParams) {
  // The model upscaler is found by name (extension optional) in --hires-upscalers-dir.
  const std::string dir = std::filesystem::path(existing_file()).parent_path().string();
  Arguments a = parse({"-m", existing_file().c_str(), "-p", "x", "--hires", "--hires-upscaler",
                       "model", "--hires-upscalers-dir", dir.c_str(), "--hires-width", "1024",
                       "--hires-steps", "7", "--hires-denoising-strength", "0", "--hires-sigmas",
                       "2,1,0", "--hires-upscale-tile-size", "64"});
  resolve_and_validate(a);
  const sd_img_gen_params_t g = a.generation.to_c_params();
  EXPECT_TRUE(g.hires.enabled);
  EXPECT_EQ(g.hires.upscaler, SD_HIRES_UPSCALER_MODEL);
  EXPECT_STREQ(g.hires.model_path, existing_file().c_str());
  EXPECT_EQ(g.hires.target_width, 1024);
  EXPECT_EQ(g.hires.target_height, 0);
  EXPECT_EQ(g.hires.steps, 7);
  EXPECT_EQ(g.hires.denoising_strength, 0.f);  // allowed: sd.cpp runs it as 0.0001
  ASSERT_EQ(g.hires.custom_sigmas_count, 3);
  EXPECT_EQ(g.hires.custom_sigmas[0], 2.f);
  EXPECT_EQ(g.hires.upscale_tile_size, 64);

  Arguments b = parse({"-m", existing_file().c_str(), "-p", "x", "--hires", "--hires-upscaler",
                       "Latent (bicubic antialiased)", "--hires-scale", "1.5"});
  resolve_and_validate(b);
  EXPECT_EQ(b.generation.to_c_params().hires.upscaler,
            SD_HIRES_UPSCALER_LATENT_BICUBIC_ANTIALIASED);
  EXPECT_EQ(b.generation.to_c_params().hires.scale, 1.5f);
  Arguments none =
      parse({"-m", existing_file().c_str(), "-p", "x", "--hires", "--hires-upscaler", "None"});
  resolve_and_validate(none);
  EXPECT_FALSE(none.generation.to_c_params().hires.enabled);
}

TEST(CliUsage, ListsEveryFlagInSections) {
  const std::string text = usage("sd-cli");
  EXPECT_EQ(text.rfind("Usage: sd-cli [options]\n", 0), 0u);
  for (const char* expected :
       {"\nCLI Options:\n", "\nContext Options:\n", "\nGeneration Options:\n",
        "  -m, --model <string>", "  -p, --prompt <string>", "  -o, --output <string>",
        "  -s, --seed", "  -W, --width <int>", "  --cfg-scale <float>", "  --sampling-method",
        "  --list-devices", "  -M, --mode", "  --vae-tiling", "  --rpc-servers <string>",
        "  --params-backend <string>", "  --offload-to-cpu", "  --metadata-format <string>"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected;
  }
  for (const auto& line : [&] {
         std::vector<std::string> lines;
         size_t start = 0;
         for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
           lines.push_back(text.substr(start, end - start));
         }
         return lines;
       }()) {
    EXPECT_LE(line.size(), 120u) << line;
  }
}

}  // namespace
}  // namespace sd::cli
