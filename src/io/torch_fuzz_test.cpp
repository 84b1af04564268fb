// Mutation fuzzing of PyTorch checkpoints (zip, zip64, legacy, Lightning nesting): random
// bytes flipped, overwritten with edge values or pickle opcodes, inserted or cut. Every
// variant must parse (and then every tensor reads inside the file) or fail with sd::Error
// naming the file. Fixed seeds keep failures reproducible; SD_IO_FUZZ_ITERATIONS runs longer
// campaigns by hand (e.g. under -DSD_SANITIZE=ON).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "io/torch_checkpoint.h"
#include "io/torch_test_util.h"

namespace sd::io {
namespace {

using test::Bytes;
using test::bytes_of;
using test::TorchFileBuilder;

int iterations() {
  const char* env = std::getenv("SD_IO_FUZZ_ITERATIONS");
  return env ? std::max(1, std::atoi(env)) : 3000;
}

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

constexpr uint64_t kInteresting[] = {0,          1,          2,          0x7f,       0x80,
                                     0xff,       0xffff,     0x7fffffff, 0x80000000, 0xffffffff,
                                     1ull << 32, 1ull << 62, 1ull << 63, ~0ull - 7,  ~0ull};
// Opcodes the reader handles, so mutations reach deep into the VM.
constexpr uint8_t kOpcodes[] = {'(',  '.',  '0',  '1',  '2',  'J',  'K',  'M', 'N',  'Q',
                                'R',  'X',  'a',  'b',  'c',  'd',  '}',  'e', 'h',  'j',
                                'l',  ']',  'q',  'r',  's',  't',  ')',  'u', 0x85, 0x86,
                                0x87, 0x88, 0x8a, 0x8c, 0x93, 0x94, 0x95, 0x81};

Bytes mutate(const Bytes& src, std::mt19937& rng) {
  Bytes b = src;
  int n_mut = 1 + static_cast<int>(rng() % 4);
  for (int m = 0; m < n_mut && !b.empty(); ++m) {
    size_t pos = rng() % b.size();
    switch (rng() % 7) {
      case 0:
        b[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        b[pos] = static_cast<uint8_t>(rng());
        break;
      case 2: {
        uint64_t v = kInteresting[rng() % std::size(kInteresting)];
        size_t width = size_t{1} << (rng() % 4);
        for (size_t i = 0; i < width && pos + i < b.size(); ++i) b[pos + i] = (v >> (8 * i)) & 0xff;
        break;
      }
      case 3:
        b[pos] = kOpcodes[rng() % std::size(kOpcodes)];
        break;
      case 4:
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(pos),
                 kOpcodes[rng() % std::size(kOpcodes)]);
        break;
      case 5:
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(pos));
        break;
      case 6:
        b.resize(pos);
        break;
    }
  }
  return b;
}

void fuzz(const Bytes& src, uint32_t seed) {
  std::mt19937 rng(seed);
  const int n = iterations();
  int parsed = 0, failed = 0;
  for (int it = 0; it < n; ++it) {
    Bytes b = mutate(src, rng);
    const uint64_t file_size = b.size();
    try {
      auto c = TorchCheckpoint::parse(MappedFile::from_memory("fuzz.pt", std::move(b)));
      for (const TensorInfo& t : c.tensors()) {
        ASSERT_LE(t.size, file_size) << "iteration " << it;
        const TorchLayout& lay = c.layout(t);
        ASSERT_LE(lay.storage_offset, file_size);
        ASSERT_LE(lay.storage_size, file_size - lay.storage_offset);
        if (t.size == 0) continue;
        std::vector<uint8_t> raw(static_cast<size_t>(t.size));
        c.read(t, raw.data());
        std::vector<uint8_t> out(static_cast<size_t>(t.loaded_size()));
        try {
          load_tensor_data(t, raw.data(), out.data());
        } catch (const Error&) {  // an i64 beyond i32 is a clean error too
        }
      }
      ++parsed;
    } catch (const Error& e) {
      ASSERT_EQ(std::string(e.what()).rfind("fuzz.pt: ", 0), 0u)
          << "iteration " << it << ": " << e.what();
      ++failed;
    }
  }
  std::printf("[ fuzz     ] %d parsed, %d refused\n", parsed, failed);
  EXPECT_GT(parsed, n / 50);
  EXPECT_GT(failed, n / 4);
}

TEST(Fuzz, TorchZip) {
  fuzz(base(false).zip_bytes(), 11);
}

TEST(Fuzz, TorchZip64Lightning) {
  TorchFileBuilder b = base(true);
  b.zip64 = true;
  fuzz(b.zip_bytes(), 12);
}

TEST(Fuzz, TorchLegacy) {
  fuzz(base(true).legacy_bytes(), 13);
}

}  // namespace
}  // namespace sd::io
