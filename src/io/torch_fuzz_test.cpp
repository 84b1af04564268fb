// Mutation fuzzing of PyTorch checkpoints (zip, zip64, deflated zip, legacy, Lightning
// nesting): random bytes flipped, overwritten with edge values or pickle opcodes, inserted
// or cut. Every variant must parse (and then every tensor reads inside the file) or fail
// with sd::Error naming the file. Fixed seeds keep failures reproducible;
// SD_IO_FUZZ_ITERATIONS runs longer campaigns by hand (e.g. under -DSD_SANITIZE=ON).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "io/fuzz_driver.h"
#include "io/torch_checkpoint.h"
#include "io/torch_test_util.h"

namespace sd::io {
namespace {

using test::Bytes;
using test::bytes_of;
using test::fuzz_iterations;
using test::FuzzCounts;
using test::MutationAlphabet;
using test::run_fuzz;
using test::TorchFileBuilder;

TorchFileBuilder base(bool lightning) {
  TorchFileBuilder b;
  b.lightning = lightning;
  b.storage("0", "FloatStorage", bytes_of<float>({0, 1, 2, 3, 4, 5}), 4);
  b.storage("1", "HalfStorage", bytes_of<uint16_t>({1, 2, 3, 4}), 2);
  b.storage("2", "LongStorage", bytes_of<int64_t>({7, -8}), 8);
  b.tensor("w", "0", 0, {2, 3})
      .tensor("wt", "0", 0, {3, 2}, {1, 3})
      .tensor("h", "1", 1, {3})
      .tensor("ids", "2", 0, {2});
  return b;
}

// Field values at their limits, and the pickle opcodes the reader handles, so mutations
// reach deep into the VM (insertions too).
const MutationAlphabet kAlphabet = {
    {0, 1, 2, 0x7f, 0x80, 0xff, 0xffff, 0x7fffffff, 0x80000000, 0xffffffff, 1ull << 32, 1ull << 62,
     1ull << 63, ~0ull - 7, ~0ull},
    {'(', '.', '0',  '1',  '2',  'J',  'K',  'M',  'N',  'Q',  'R',  'X', 'a',
     'b', 'c', 'd',  '}',  'e',  'h',  'j',  'l',  ']',  'q',  'r',  's', 't',
     ')', 'u', 0x85, 0x86, 0x87, 0x88, 0x8a, 0x8c, 0x93, 0x94, 0x95, 0x81},
    true};

void fuzz(const Bytes& src, uint32_t seed) {
  const int n = fuzz_iterations(3000);
  FuzzCounts c =
      run_fuzz(src, seed, n, kAlphabet, "fuzz.pt", [](std::shared_ptr<const MappedFile> file) {
        const uint64_t file_size = file->size();
        auto ckpt = TorchCheckpoint::parse(std::move(file));
        for (const TensorInfo& t : ckpt.tensors()) {
          ASSERT_LE(t.size, file_size);
          const TorchLayout& lay = ckpt.layout(t);
          ASSERT_LE(lay.storage_offset, file_size);
          ASSERT_LE(lay.storage_size, file_size - lay.storage_offset);
          if (t.size == 0) continue;
          std::vector<uint8_t> raw(static_cast<size_t>(t.size));
          ckpt.read(t, raw.data());
          std::vector<uint8_t> out(static_cast<size_t>(t.loaded_size()));
          try {
            load_tensor_data(t, raw.data(), out.data());
          } catch (const Error&) {  // an i64 beyond i32 is a clean error too
          }
        }
      });
  EXPECT_GT(c.parsed, n / 50);
  EXPECT_GT(c.refused, n / 4);
}

TEST(Fuzz, TorchZip) {
  fuzz(base(false).zip_bytes(), 11);
}

TEST(Fuzz, TorchZip64Lightning) {
  TorchFileBuilder b = base(true);
  b.zip64 = true;
  fuzz(b.zip_bytes(), 12);
}

TEST(Fuzz, TorchZipDeflated) {
  TorchFileBuilder b = base(false);
  b.deflate = true;
  fuzz(b.zip_bytes(), 14);
}

TEST(Fuzz, TorchLegacy) {
  fuzz(base(true).legacy_bytes(), 13);
}

}  // namespace
}  // namespace sd::io
