// Reads a real-layout SD 1.5 checkpoint (random weights, 2 GB) made by
// ../shared/tools/make_random_sd.py. Opt-in, because making the file takes ~40 s and 2 GB
// of disk: set SD_IO_SD15_FILE to an existing file, or SD_IO_GENERATE_SD15=1 to make one
// in a temp dir.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "io/io_test_util.h"
#include "io/safetensors.h"

namespace sd::io {
namespace {

TEST(Sd15Checkpoint, ReaderLoadsEveryTensor) {
  std::unique_ptr<test::TempDir> dir;
  std::string path;
  if (const char* f = std::getenv("SD_IO_SD15_FILE")) {
    path = f;
  } else if (const char* m = std::getenv("SD_TEST_SD15_MODEL")) {
    path = m;  // the fidelity tests' checkpoint (scripts/test.sh makes it)
  } else if (const char* g = std::getenv("SD_IO_GENERATE_SD15"); g && std::string(g) == "1") {
    const std::string tool = std::string(SD_SHARED_DIR) + "/tools/make_random_sd.py";
    if (!std::filesystem::exists(tool)) GTEST_SKIP() << tool << " is absent";
    if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
      GTEST_SKIP() << "python3 with numpy is not installed";
    }
    dir = std::make_unique<test::TempDir>();
    path = dir->file("sd15.safetensors");
    std::string cmd = "/usr/bin/python3 " + tool + " --arch sd15 --dtype f16 --seed 1 --out " +
                      path + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  } else {
    GTEST_SKIP() << "set SD_TEST_SD15_MODEL or SD_IO_SD15_FILE=<file>, or SD_IO_GENERATE_SD15=1";
  }

  auto t0 = std::chrono::steady_clock::now();
  SafetensorsFile st = SafetensorsFile::open(path);
  auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(st.tensors().size(), 1131u);
  EXPECT_EQ(st.metadata().at("format"), "pt");

  // The generator writes tensors back to back: their sizes add up to the data section.
  uint64_t total = 0, checksum = 0;
  for (const TensorInfo& t : st.tensors()) {
    total += t.size;
    const uint8_t* p = st.data(t);
    for (uint64_t i = 0; i < t.size; i += 64) checksum += p[i];  // touch every cache line
  }
  auto t2 = std::chrono::steady_clock::now();
  EXPECT_EQ(total, st.file().size() - st.data_offset());

  const TensorInfo* conv = st.find("model.diffusion_model.input_blocks.0.0.weight");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->dtype, DType::F16);
  EXPECT_EQ(conv->ne, (std::array<int64_t, 4>{3, 3, 4, 320}));  // [320, 4, 3, 3] in the file

  const TensorInfo* ids =
      st.find("cond_stage_model.transformer.text_model.embeddings.position_ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->file_dtype, FileDType::I64);
  std::vector<int32_t> pos(77);
  load_tensor_data(*ids, st.data(*ids), pos.data());
  for (int i = 0; i < 77; ++i) EXPECT_EQ(pos[i], i);

  double open_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  double read_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf(
      "[ sd15     ] %zu tensors, %.1f MiB, header in %.1f ms, all bytes in %.2f s "
      "(%.0f MiB/s; checksum %llu)\n",
      st.tensors().size(), total / 1048576.0, open_ms, read_s, total / 1048576.0 / read_s,
      static_cast<unsigned long long>(checksum));
}

}  // namespace
}  // namespace sd::io
