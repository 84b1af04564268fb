#include "backend/placement.h"

#include <gtest/gtest.h>

#include "backend/auto_fit.h"
#include "backend/backend_manager.h"
#include "backend/cpu/cpu_device.h"
#include "backend/max_vram.h"
#include "fake_device.h"
#include "tensor/error.h"

namespace sd {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Placement, ModuleNamesIgnoreCaseDashesAndUnderscores) {
  EXPECT_EQ(parse_module("diffusion"), Module::Diffusion);
  EXPECT_EQ(parse_module("UNet"), Module::Diffusion);
  EXPECT_EQ(parse_module("DiT"), Module::Diffusion);
  EXPECT_EQ(parse_module("text_encoder"), Module::TextEncoder);
  EXPECT_EQ(parse_module("Text-Encoders"), Module::TextEncoder);
  EXPECT_EQ(parse_module("clip"), Module::TextEncoder);
  EXPECT_EQ(parse_module("t5xxl"), Module::TextEncoder);
  EXPECT_EQ(parse_module("clip_vision"), Module::ClipVision);
  EXPECT_EQ(parse_module("first_stage"), Module::Vae);
  EXPECT_EQ(parse_module("TAE"), Module::Vae);
  EXPECT_EQ(parse_module("control"), Module::ControlNet);
  EXPECT_EQ(parse_module("pmid"), Module::PhotoMaker);
  EXPECT_EQ(parse_module("hires"), Module::Upscaler);
  EXPECT_EQ(parse_module("yolo"), Module::Detector);
  EXPECT_EQ(parse_module("decoder"), std::nullopt);
}

TEST(Placement, SingleNameIsTheDefault) {
  const Assignment a = parse_assignment(" CUDA0 ", "--backend");
  EXPECT_EQ(a.default_name, "CUDA0");
  EXPECT_TRUE(a.module.empty());
  EXPECT_EQ(a.get(Module::Vae), "CUDA0");
}

TEST(Placement, ModuleEntriesWinOverTheDefaultInAnyOrder) {
  const Assignment a = parse_assignment("te=disk, *=cpu", "--params-backend");
  EXPECT_EQ(a.get(Module::TextEncoder), "disk");
  EXPECT_EQ(a.get(Module::Diffusion), "cpu");
  const Assignment b = parse_assignment("all=cuda0,vae=cpu,default=RPC0", "--backend");
  EXPECT_EQ(b.get(Module::Vae), "cpu");
  EXPECT_EQ(b.get(Module::Diffusion), "RPC0");  // a later default replaces an earlier one
}

TEST(Placement, LaterEntryForAModuleReplacesTheEarlier) {
  const Assignment a = parse_assignment("unet=cpu,diffusion=cuda1,,", "--backend");
  EXPECT_EQ(a.get(Module::Diffusion), "cuda1");
  EXPECT_EQ(a.get(Module::TextEncoder), "");
}

TEST(Placement, EmptySpecMeansDefaults) {
  EXPECT_TRUE(parse_assignment("", "--backend").empty());
  EXPECT_TRUE(parse_assignment(" , ", "--backend").empty());
  EXPECT_TRUE(is_default_device_name("Auto"));
  EXPECT_TRUE(is_default_device_name("default"));
  EXPECT_TRUE(is_default_device_name(" "));
  EXPECT_FALSE(is_default_device_name("cpu"));
  EXPECT_TRUE(is_disk_name("DISK"));
}

TEST(Placement, UnknownModuleListsTheValidOnes) {
  const std::string e = error_of([] { parse_assignment("decoder=cpu", "--backend"); });
  EXPECT_NE(e.find("--backend"), std::string::npos) << e;
  EXPECT_NE(e.find("'decoder'"), std::string::npos) << e;
  EXPECT_NE(e.find("diffusion (model, unet, dit)"), std::string::npos) << e;
  EXPECT_NE(e.find("all/default/*"), std::string::npos) << e;
}

TEST(Placement, EntryWithoutDeviceIsAnError) {
  const std::string e = error_of([] { parse_assignment("te=", "--params-backend"); });
  EXPECT_NE(e.find("'te='"), std::string::npos) << e;
  EXPECT_NE(error_of([] { parse_assignment("=cpu", "--backend"); }), "");
}

class Manager : public ::testing::Test {
 protected:
  Manager() {
    registry_.add(std::make_unique<CpuDevice>());
    registry_.add(std::make_unique<test::FakeDevice>("CUDA0"));
    registry_.add(std::make_unique<test::FakeDevice>("CUDA1"));
  }
  Device& dev(const char* name) { return registry_.get(name); }
  DeviceRegistry registry_;
};

TEST_F(Manager, DefaultIsTheFirstGpuAndWeightsStayWithTheirModule) {
  BackendManager m("", "", {}, registry_);
  for (Module mod : all_modules()) {
    EXPECT_EQ(&m.compute_device(mod), &dev("CUDA0"));
    EXPECT_EQ(m.residency(mod).kind, Residency::Kind::Compute);
  }
}

TEST_F(Manager, ResolvesNamesCaseInsensitivelyPerModule) {
  BackendManager m("te=cpu,vae=cuda1,gpu", "diffusion=CPU,te=cpu,vae=disk", {}, registry_);
  EXPECT_EQ(&m.compute_device(Module::TextEncoder), &dev("CPU"));
  EXPECT_EQ(&m.compute_device(Module::Vae), &dev("CUDA1"));
  EXPECT_EQ(&m.compute_device(Module::Diffusion), &dev("CUDA0"));
  // te's weights are where it computes: nothing to stage.
  EXPECT_EQ(m.residency(Module::TextEncoder).kind, Residency::Kind::Compute);
  EXPECT_EQ(m.residency(Module::Diffusion).kind, Residency::Kind::Device);
  EXPECT_EQ(m.residency(Module::Diffusion).device, &dev("CPU"));
  EXPECT_EQ(m.residency(Module::Vae).kind, Residency::Kind::Disk);
  EXPECT_EQ(m.describe(Module::Diffusion), "diffusion: CUDA0, weights on CPU");
  EXPECT_EQ(m.describe(Module::Vae), "vae: CUDA1, weights on disk");
}

TEST_F(Manager, WithoutAGpuDefaultIsTheCpuAndGpuIsAnError) {
  DeviceRegistry cpu_only;
  cpu_only.add(std::make_unique<CpuDevice>());
  BackendManager m("auto", "", {}, cpu_only);
  EXPECT_EQ(m.compute_device(Module::Vae).name(), "CPU");
  const std::string e = error_of([&] { BackendManager("vae=gpu", "", {}, cpu_only); });
  EXPECT_NE(e.find("no GPU"), std::string::npos) << e;
  EXPECT_NE(e.find("vae=gpu"), std::string::npos) << e;
}

TEST_F(Manager, DiskCannotCompute) {
  const std::string e = error_of([&] { BackendManager("disk", "", {}, registry_); });
  EXPECT_NE(e.find("--backend disk"), std::string::npos) << e;
  EXPECT_NE(e.find("--params-backend"), std::string::npos) << e;
  const std::string f = error_of([&] { BackendManager("te=disk", "", {}, registry_); });
  EXPECT_NE(f.find("te=disk"), std::string::npos) << f;
}

TEST_F(Manager, UnknownDeviceListsTheDevices) {
  const std::string e = error_of([&] { BackendManager("", "te=cuda9", {}, registry_); });
  EXPECT_NE(e.find("--params-backend"), std::string::npos) << e;
  EXPECT_NE(e.find("'cuda9'"), std::string::npos) << e;
  EXPECT_NE(e.find("CPU, CUDA0, CUDA1"), std::string::npos) << e;
  EXPECT_NE(e.find("disk"), std::string::npos) << e;
}

TEST(MaxVram, ParsesOneBudgetOrBudgetsByDevice) {
  EXPECT_TRUE(parse_max_vram("").empty());
  EXPECT_TRUE(parse_max_vram("0").empty());
  const MaxVram one = parse_max_vram(" 6 ");
  ASSERT_TRUE(one.all.has_value());
  EXPECT_EQ(*one.all, 6.0);
  const MaxVram named = parse_max_vram("RPC0=1.5, cuda0=6,*=2");
  EXPECT_EQ(named.by_device.at("rpc0"), 1.5);
  EXPECT_EQ(named.by_device.at("cuda0"), 6.0);
  EXPECT_EQ(*named.all, 2.0);
  test::FakeDevice rpc0("RPC0", DeviceKind::Remote);
  EXPECT_EQ(named.bytes_for(rpc0), size_t{3} << 29);
  test::FakeDevice other("CUDA1");
  EXPECT_EQ(named.bytes_for(other), size_t{2} << 30);
  // Negative: the device's free memory (1 GiB for the test device) less that much.
  EXPECT_EQ(parse_max_vram("-0.25").bytes_for(other), size_t{3} << 28);
}

TEST(MaxVram, BadValuesSayWhatIsExpected) {
  for (const char* bad : {"six", "RPC0=", "=4", "4GB", "nan"}) {
    const std::string e = error_of([&] { parse_max_vram(bad); });
    EXPECT_NE(e.find("--max-vram"), std::string::npos) << bad << ": " << e;
  }
  test::FakeDevice gpu("CUDA0");
  const std::string e = error_of([&] { parse_max_vram("-2").bytes_for(gpu); });
  EXPECT_NE(e.find("1.00 GiB free"), std::string::npos) << e;
}

TEST_F(Manager, BudgetedDevicesStreamWeightsFromHostMemory) {
  BackendManager m("te=cpu,diffusion=cuda0,vae=cuda1", "vae=disk", {}, registry_);
  const std::vector<std::string> notes = m.set_memory_budgets("CUDA0=2,cpu=4", true);
  const Residency d = m.residency(Module::Diffusion);
  EXPECT_EQ(d.kind, Residency::Kind::Device);
  EXPECT_EQ(d.device, &dev("CPU"));
  EXPECT_TRUE(d.streamed);
  EXPECT_FALSE(m.residency(Module::Vae).streamed);  // CUDA1 has no budget
  EXPECT_EQ(m.describe(Module::Diffusion),
            "diffusion: CUDA0, weights on CPU, streamed within 2.00 GiB with prefetch");
  // The CPU reads weights in place: its budget is said to apply to nothing.
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("CPU reads the weights where they are"), std::string::npos) << notes[0];
}

TEST_F(Manager, DiskWeightsOfABudgetedDeviceAreReadIntoHostMemory) {
  BackendManager m("cuda0", "disk", {}, registry_);
  m.set_memory_budgets("1", false);
  const Residency r = m.residency(Module::Vae);
  EXPECT_EQ(r.kind, Residency::Kind::Disk);
  EXPECT_EQ(r.device, &dev("CPU"));
  EXPECT_TRUE(r.streamed);
}

TEST_F(Manager, UnknownBudgetDeviceAndLoneStreamLayersAreSaid) {
  BackendManager m("cuda0", "", {}, registry_);
  const std::string e = error_of([&] { m.set_memory_budgets("cuda7=2", false); });
  EXPECT_NE(e.find("unknown device 'cuda7'"), std::string::npos) << e;
  const std::vector<std::string> notes = m.set_memory_budgets("0", true);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("without one it does nothing"), std::string::npos) << notes[0];
}

constexpr size_t kGiB = size_t{1} << 30;

TEST(AutoFit, BiggestModuleFirstOntoTheDeviceWithTheMostRoom) {
  DeviceRegistry r;
  r.add(std::make_unique<CpuDevice>());
  r.add(std::make_unique<test::FakeDevice>("CUDA0", DeviceKind::Gpu, 4 * kGiB));
  r.add(std::make_unique<test::FakeDevice>("RPC0", DeviceKind::Remote, 8 * kGiB));
  const FitPlan p = plan_auto_fit(
      {{Module::TextEncoder, kGiB / 4}, {Module::Diffusion, 5 * kGiB / 2}, {Module::Vae, kGiB / 8}},
      r, MaxVram{});
  // diffusion takes RPC0 (7.5 GiB budget, 5 left); te then has most room there too.
  EXPECT_EQ(p.backend, "te=RPC0,diffusion=RPC0,vae=RPC0");
  EXPECT_EQ(p.params_backend, "");
  EXPECT_EQ(p.max_vram, "");
  ASSERT_EQ(p.lines.size(), 3u);
  EXPECT_NE(p.lines[0].find("diffusion (2684 MB of weights) on RPC0: fits its 7.50 GiB"),
            std::string::npos)
      << p.lines[0];
}

TEST(AutoFit, AModuleNoDeviceHoldsIsStreamedWithinTheRoomiestOne) {
  DeviceRegistry r;
  r.add(std::make_unique<CpuDevice>());
  r.add(std::make_unique<test::FakeDevice>("CUDA0", DeviceKind::Gpu, 3 * kGiB));
  const FitPlan p = plan_auto_fit(
      {{Module::TextEncoder, kGiB / 4}, {Module::Diffusion, 5 * kGiB}, {Module::Vae, kGiB / 8}}, r,
      MaxVram{}, kGiB / 2);
  // The UNet streams on CUDA0, which then holds nothing else whole: the others stream too.
  EXPECT_EQ(p.backend, "te=CUDA0,diffusion=CUDA0,vae=CUDA0");
  EXPECT_EQ(p.params_backend, "diffusion=cpu,te=cpu,vae=cpu");
  EXPECT_EQ(p.max_vram, "CUDA0=2.500");
  EXPECT_NE(p.lines[0].find("weights streamed from RAM within its 2.50 GiB"), std::string::npos)
      << p.lines[0];
}

TEST(AutoFit, BudgetsComeFromMaxVramAndTheCpuTakesWhatFitsNowhere) {
  DeviceRegistry r;
  r.add(std::make_unique<CpuDevice>());
  r.add(std::make_unique<test::FakeDevice>("CUDA0", DeviceKind::Gpu, 16 * kGiB));
  // --max-vram 0.75 leaves no room beside a 1 GiB compute reserve for anything.
  const FitPlan p = plan_auto_fit({{Module::Diffusion, kGiB}, {Module::Vae, kGiB / 8}}, r,
                                  parse_max_vram("0.75"));
  EXPECT_EQ(p.backend, "diffusion=CPU,vae=CPU");
  EXPECT_NE(p.lines[0].find("no GPU or remote device has room"), std::string::npos) << p.lines[0];
  DeviceRegistry cpu_only;
  cpu_only.add(std::make_unique<CpuDevice>());
  const FitPlan q = plan_auto_fit({{Module::Diffusion, kGiB}}, cpu_only, MaxVram{});
  EXPECT_EQ(q.backend, "diffusion=CPU");
  EXPECT_NE(q.lines[0].find("no GPU or remote device here"), std::string::npos) << q.lines[0];
}

TEST(BackendManagerCpu, OneBackendPerDeviceSharedByModules) {
  BackendManager m("cpu", "", BackendOptions{1});
  Backend& te = m.backend(Module::TextEncoder);
  EXPECT_EQ(&te, &m.backend(Module::Diffusion));
  EXPECT_EQ(te.device().name(), "CPU");
  m.release_caches();
}

}  // namespace
}  // namespace sd
