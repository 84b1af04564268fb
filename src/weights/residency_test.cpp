// The ModelManager's residency state machine: load, stage, release, reload, with byte
// counters, on the CPU and on a test device the host cannot address.
#include <gtest/gtest.h>

#include <filesystem>

#include "backend/registry.h"
#include "fake_device.h"
#include "io/io_test_util.h"
#include "nn/random_weights.h"
#include "tensor/error.h"
#include "weights/model_manager.h"

namespace sd::weights {
namespace {

namespace fs = std::filesystem;

const char* kUnetWeight = "model.diffusion_model.out.2.weight";
const char* kUnetBias = "model.diffusion_model.out.2.bias";
const char* kTextNorm = "cond_stage_model.transformer.text_model.final_layer_norm.weight";

Device& host_cpu() {
  return DeviceRegistry::instance().get("CPU");
}

class WeightResidency : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("model.safetensors");
    write(path_, 7);
    loader_.add(path_);
  }
  // A tiny checkpoint: a UNet linear (f16, its bias f32) and a text-encoder norm (f32).
  static void write(const std::string& path, uint32_t seed, int64_t out = 8) {
    nn::RandomWeights w(DType::F16, seed);
    Context ctx;
    w.get(ctx, kUnetWeight, make_shape({32, out}));
    w.get(ctx, kUnetBias, make_shape({out}));
    w.get(ctx, kTextNorm, make_shape({16}));
    w.save_safetensors(path);
  }
  void add(ModelManager& m, Residency unet, Device& unet_device = host_cpu()) {
    m.add_module({"te", {"cond_stage_model."}, &host_cpu(), {}});
    m.add_module({"diffusion", {"model.diffusion_model."}, &unet_device, unet});
    m.declare("diffusion", {{kUnetWeight, make_shape({32, 8})}, {kUnetBias, make_shape({8})}});
    m.declare("te", {{kTextNorm, make_shape({16})}});
  }
  static Residency disk() { return {Residency::Kind::Disk, nullptr}; }
  Tensor* get(ModelManager& m, const char* name) {
    return m.get(ctx_, name,
                 name == std::string(kUnetWeight) ? make_shape({32, 8})
                 : name == std::string(kUnetBias) ? make_shape({8})
                                                  : make_shape({16}));
  }

  io::test::TempDir dir_;
  std::string path_;
  ModelLoader loader_;
  Context ctx_;
};

TEST_F(WeightResidency, DiskWeightsAreFreedWhenTheirPhaseEndsAndComeBack) {
  ModelManager m(loader_);
  add(m, disk());
  get(m, kUnetWeight);
  get(m, kUnetWeight);  // the same phase: not read again
  get(m, kTextNorm);
  // The module's first use this phase reads everything it declared: weight and bias.
  const size_t unet = 32 * 8 * 2 + 8 * 4;
  EXPECT_EQ(m.mapped_bytes(), unet + 16 * 4);
  EXPECT_EQ(m.traffic().mapped, unet + 16 * 4);
  m.phase_done("te");  // default residency: kept
  EXPECT_EQ(m.mapped_bytes(), unet + 16 * 4);
  m.phase_done("diffusion");
  EXPECT_EQ(m.mapped_bytes(), 16u * 4);
  EXPECT_EQ(m.traffic().freed, unet);
  Tensor* again = get(m, kUnetWeight);
  EXPECT_EQ(m.traffic().mapped, 2 * unet + 16 * 4);
  std::vector<uint16_t> bytes(32 * 8);
  tensor_get(*again, bytes.data(), 0, bytes.size() * 2);
  std::vector<uint8_t> expected(bytes.size() * 2);
  loader_.read(kUnetWeight, DType::F16, expected.data());
  EXPECT_EQ(std::memcmp(bytes.data(), expected.data(), expected.size()), 0);
}

// Mapped weights kept on disk leave RAM after each graph's last read of them
// (backend/release_after_use.h); the others stay for the phase.
TEST_F(WeightResidency, MappedDiskWeightsAskToLeaveAfterEachUse) {
  ModelManager m(loader_);
  add(m, disk());
  Tensor* unet = get(m, kUnetWeight);
  Tensor* text = get(m, kTextNorm);
  ASSERT_TRUE(unet->buffer->read_only());  // mapped
  EXPECT_TRUE(unet->buffer->evict_after_use());
  EXPECT_FALSE(text->buffer->evict_after_use());  // default residency
  ModelManager converted(loader_, ModelManagerOptions{DType::F32, true});
  add(converted, disk());
  EXPECT_FALSE(get(converted, kUnetWeight)->buffer->evict_after_use());  // a copy in RAM
}

TEST_F(WeightResidency, ConvertedDiskWeightsAreCopiesThatGoAway) {
  ModelManager m(loader_, ModelManagerOptions{DType::F32, true});
  add(m, disk());
  get(m, kUnetWeight);
  EXPECT_EQ(m.mapped_bytes(), 8u * 4);  // the bias is f32 in the file: used as stored
  EXPECT_EQ(m.resident_bytes(), 32u * 8 * 4);
  EXPECT_EQ(m.traffic().loaded, 32u * 8 * 4);
  m.phase_done("diffusion");
  EXPECT_EQ(m.resident_bytes(), 0u);
  get(m, kUnetWeight);
  EXPECT_EQ(m.traffic().loaded, 2u * 32 * 8 * 4);
}

// Default residency keeps weights, but not host copies converted on load (--type): the OS
// cannot page those out, so they would sit beside the next phase's weights. They are
// converted again, to the same bytes, when the module runs next; mapped ones stay.
TEST_F(WeightResidency, ConvertedHostCopiesAreFreedWhenTheirPhaseEnds) {
  ModelManager m(loader_, ModelManagerOptions{DType::BF16, true});
  add(m, {});
  Tensor* first = get(m, kUnetWeight);
  get(m, kTextNorm);
  const size_t unet = 32 * 8 * 2;  // converted to bf16; the f32 bias stays mapped
  const size_t mapped = m.mapped_bytes(), resident = m.resident_bytes();
  EXPECT_EQ(mapped, 8u * 4);
  EXPECT_GT(resident, unet);
  std::vector<uint8_t> before(first->nbytes());
  tensor_get(*first, before.data(), 0, before.size());
  m.phase_done("diffusion");
  EXPECT_EQ(m.resident_bytes(), resident - unet);  // the text encoder's copies stay
  EXPECT_EQ(m.mapped_bytes(), mapped);
  m.phase_done("te");
  EXPECT_EQ(m.resident_bytes(), 0u);
  Tensor* again = get(m, kUnetWeight);
  EXPECT_EQ(again->type, DType::BF16);
  std::vector<uint8_t> after(again->nbytes());
  tensor_get(*again, after.data(), 0, after.size());
  EXPECT_EQ(before, after);
  EXPECT_EQ(m.resident_bytes(), unet);
}

TEST_F(WeightResidency, WithoutConversionDefaultResidencyKeepsEverything) {
  ModelManager m(loader_);
  add(m, {});
  get(m, kUnetWeight);
  const size_t mapped = m.mapped_bytes();
  m.phase_done("diffusion");
  EXPECT_EQ(m.mapped_bytes(), mapped);
  get(m, kUnetWeight);
  EXPECT_EQ(m.traffic().mapped, mapped);  // not read again
}

TEST_F(WeightResidency, WeightsOnTheHostAreStagedIntoADeviceForEachGraph) {
  test::FakeDevice gpu("CUDA0");
  ModelManager m(loader_);
  add(m, {Residency::Kind::Device, &host_cpu()}, gpu);
  Tensor* w = get(m, kUnetWeight);
  EXPECT_EQ(w->buffer->type().device().name(), "CUDA0");
  get(m, kUnetWeight);  // one staged copy per graph, however often it is asked for
  const size_t bytes = 32 * 8 * 2;
  EXPECT_EQ(gpu.live_bytes(), bytes);
  EXPECT_EQ(m.mapped_bytes(), bytes + 8 * 4);  // host copies: the mapped file (and bias)
  std::vector<uint8_t> staged(bytes), expected(bytes);
  tensor_get(*w, staged.data());
  loader_.read(kUnetWeight, DType::F16, expected.data());
  EXPECT_EQ(staged, expected);
  m.after_compute();
  EXPECT_EQ(gpu.live_bytes(), 0u);
  EXPECT_EQ(m.traffic().staged, bytes);
  EXPECT_EQ(m.traffic().freed, bytes);
  get(m, kUnetWeight);
  EXPECT_EQ(m.traffic().staged, 2 * bytes);
  m.phase_done("diffusion");  // drops the staged copy too; the host copy stays
  EXPECT_EQ(gpu.live_bytes(), 0u);
  EXPECT_EQ(m.mapped_bytes(), bytes + 8 * 4);
}

TEST_F(WeightResidency, WeightsOnTheirDeviceAreLoadedOnceAndKept) {
  test::FakeDevice gpu("CUDA0");
  ModelManager m(loader_);
  add(m, {}, gpu);
  get(m, kUnetWeight);
  m.after_compute();
  m.phase_done("diffusion");
  EXPECT_EQ(gpu.live_bytes(), 32u * 8 * 2 + 8 * 4);  // weight and bias
  EXPECT_EQ(m.traffic().loaded, 32u * 8 * 2 + 8 * 4);
  EXPECT_EQ(m.traffic().staged, 0u);
}

TEST_F(WeightResidency, EagerLoadReadsEveryDeclaredWeightInParallel) {
  ModelManager m(loader_, ModelManagerOptions{DType::F32, true, 3});
  add(m, disk());
  size_t last = 0, total = 0;
  m.load_module("diffusion", [&](size_t done, size_t all) {
    EXPECT_GE(done, last);
    last = done;
    total = all;
  });
  EXPECT_EQ(last, 2u);
  EXPECT_EQ(total, 2u);
  EXPECT_EQ(m.resident_bytes(), 32u * 8 * 4);  // converted from f16
  EXPECT_EQ(m.mapped_bytes(), 8u * 4);         // the f32 bias, as stored
  const size_t loaded = m.traffic().loaded;
  get(m, kUnetWeight);  // already there
  EXPECT_EQ(m.traffic().loaded, loaded);
}

TEST_F(WeightResidency, DeclarationListsEveryProblemAtOnce) {
  ModelManager m(loader_);
  m.add_module({"diffusion", {"model.diffusion_model."}, &host_cpu(), {}});
  try {
    m.declare("diffusion", {{kUnetWeight, make_shape({32, 9})},
                            {"model.diffusion_model.missing.weight", make_shape({4})},
                            {kUnetBias, make_shape({8})}});
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("2 of 3 tensors"), std::string::npos) << what;
    EXPECT_NE(what.find("is [32, 8] in '" + path_ + "', the model expects [32, 9]"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("'model.diffusion_model.missing.weight' [4] is missing"), std::string::npos)
        << what;
  }
}

TEST_F(WeightResidency, DiskFileDeletedBetweenPhasesIsNamedAndCanComeBack) {
  ModelManager m(loader_);
  add(m, disk());
  get(m, kUnetWeight);
  m.phase_done("diffusion");
  const std::string saved = dir_.file("saved.safetensors");
  fs::rename(path_, saved);
  try {
    get(m, kUnetWeight);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + path_ + "' is gone"), std::string::npos) << e.what();
  }
  get(m, kTextNorm);  // default residency: still usable
  // Put back as a copy (a new file with the same tensors): read again from it.
  fs::copy_file(saved, path_);
  Tensor* w = get(m, kUnetWeight);
  std::vector<uint8_t> bytes(32 * 8 * 2), expected(bytes.size());
  tensor_get(*w, bytes.data());
  loader_.read(kUnetWeight, DType::F16, expected.data());
  EXPECT_EQ(bytes, expected);
}

TEST_F(WeightResidency, DiskFileChangedToOtherTensorsIsRefused) {
  ModelManager m(loader_);
  add(m, disk());
  get(m, kUnetWeight);
  m.phase_done("diffusion");
  const std::string other = dir_.file("other.safetensors");
  write(other, 9, 4);
  fs::rename(other, path_);
  try {
    get(m, kUnetWeight);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + path_ + "' changed"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sd::weights
