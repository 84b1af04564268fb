// Mutation fuzzing: valid small files with random bytes flipped, overwritten, inserted or
// cut. Every variant must either parse (and then every tensor range lies inside the file)
// or fail with sd::Error naming the file. Fixed seeds keep failures reproducible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"

namespace sd::io {
namespace {

using test::Bytes;
using test::ByteWriter;

// Per base file; the whole test takes well under a second. SD_IO_FUZZ_ITERATIONS runs
// longer campaigns by hand (e.g. under -DSD_SANITIZE=ON).
int iterations() {
  const char* env = std::getenv("SD_IO_FUZZ_ITERATIONS");
  return env ? std::max(1, std::atoi(env)) : 5000;
}

Bytes base_safetensors() {
  test::SafetensorsBuilder b;
  b.metadata("format", "pt").metadata("modelspec.title", "fuzz");
  b.add("a.weight", "F16", {4, 3}, test::random_bytes(24, 1))
      .add("a.bias", "F32", {4}, test::random_bytes(16, 2))
      .add("ids", "I64", {1, 3}, test::random_bytes(24, 3))
      .add("f8", "F8_E4M3", {2, 2, 2, 2}, test::random_bytes(16, 4))
      .add("mask", "BOOL", {5}, Bytes{0, 1, 1, 0, 1})
      .add("scalar", "BF16", {}, test::random_bytes(2, 5));
  return b.bytes();
}

Bytes base_gguf() {
  test::GgufBuilder g;
  g.kv_string("general.architecture", "sd1").kv_scalar<uint32_t>("general.alignment", 4, 32);
  ByteWriter tokens;
  tokens.put<uint32_t>(8).put<uint64_t>(3).str("a").str("bc").str("");
  g.kv("tokenizer.ggml.tokens", 9, tokens.b);
  ByteWriter nested;
  nested.put<uint32_t>(9)
      .put<uint64_t>(1)
      .put<uint32_t>(7)
      .put<uint64_t>(2)
      .put<uint8_t>(1)
      .put<uint8_t>(0);
  g.kv("nested", 9, nested.b).kv_scalar<double>("scale", 12, 0.18215);
  g.tensor("q", {64, 2}, 2, test::random_bytes(72, 1))
      .tensor("f", {3, 2}, 1, test::random_bytes(12, 2))
      .tensor("k", {256}, 12, test::random_bytes(144, 3))
      .tensor("i", {4}, 24, test::random_bytes(4, 4));
  return g.bytes();
}

Bytes written_gguf() {
  test::TempDir dir;
  GgufWriter w;
  w.add("general.name", GgufValue::string("fuzz"));
  w.add("scores", GgufValue::numeric_array(std::vector<float>{1, 2, 3}));
  Bytes a = test::random_bytes(34 * 2, 9), b = test::random_bytes(16, 8);
  w.add_tensor("a", DType::Q8_0, {32, 2}, [&](GgufSink& s) { s.write(a.data(), a.size()); });
  w.add_tensor("b", DType::BF16, {2, 2, 2}, [&](GgufSink& s) { s.write(b.data(), b.size()); });
  w.write(dir.file("w.gguf"));
  return test::read_file(dir.file("w.gguf"));
}

// Values that sit on the edges the readers check.
constexpr uint64_t kInteresting[] = {0,
                                     1,
                                     2,
                                     4,
                                     5,
                                     8,
                                     31,
                                     32,
                                     0x7f,
                                     0x80,
                                     0xff,
                                     0xffff,
                                     0x7fffffff,
                                     0x80000000,
                                     0xffffffff,
                                     uint64_t{1} << 32,
                                     uint64_t{1} << 62,
                                     uint64_t{1} << 63,
                                     ~uint64_t{0} - 7,
                                     ~uint64_t{0}};
constexpr char kJsonBytes[] = "{}[]\":,-.0123456789eE \\u";

Bytes mutate(const Bytes& base, std::mt19937& rng) {
  Bytes b = base;
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
      case 2: {  // an interesting little-endian field value, of width 1, 2, 4 or 8
        uint64_t v = kInteresting[rng() % std::size(kInteresting)];
        size_t width = size_t{1} << (rng() % 4);
        for (size_t i = 0; i < width && pos + i < b.size(); ++i) b[pos + i] = (v >> (8 * i)) & 0xff;
        break;
      }
      case 3:
        b[pos] = static_cast<uint8_t>(kJsonBytes[rng() % (sizeof(kJsonBytes) - 1)]);
        break;
      case 4:
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(pos), static_cast<uint8_t>(rng()));
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

// On success, every tensor must lie inside the file and load without error or crash.
template <typename File>
void check_parsed(const File& f) {
  uint64_t checksum = 0;
  for (const TensorInfo& t : f.tensors()) {
    ASSERT_LE(t.offset, f.file().size());
    ASSERT_LE(t.size, f.file().size() - t.offset);
    const uint8_t* p = f.data(t);
    for (uint64_t i = 0; i < t.size; ++i) checksum += p[i];
    if (t.needs_conversion()) {
      std::vector<uint8_t> out(static_cast<size_t>(t.loaded_size()));
      try {
        load_tensor_data(t, p, out.data());
      } catch (const Error&) {  // an integer out of i32 range is a clean error too
      }
    }
  }
  (void)checksum;
}

template <typename Parse>
void fuzz(const Bytes& base, uint32_t seed, Parse parse) {
  std::mt19937 rng(seed);
  const int n = iterations();
  int parsed = 0, failed = 0;
  for (int it = 0; it < n; ++it) {
    Bytes b = mutate(base, rng);
    try {
      auto f = parse(MappedFile::from_memory("fuzz.bin", std::move(b)));
      check_parsed(f);
      ++parsed;
    } catch (const Error& e) {
      ASSERT_EQ(std::string(e.what()).rfind("fuzz.bin: ", 0), 0u)
          << "iteration " << it << ": " << e.what();
      ++failed;
    }
  }
  std::printf("[ fuzz     ] %d parsed, %d refused\n", parsed, failed);
  // Both outcomes must occur, or the mutations are too weak (or too strong) to test much.
  EXPECT_GT(parsed, n / 50);
  EXPECT_GT(failed, n / 2);
}

TEST(Fuzz, Safetensors) {
  fuzz(base_safetensors(), 1, [](auto f) { return SafetensorsFile::parse(f); });
}

TEST(Fuzz, HandBuiltGguf) {
  fuzz(base_gguf(), 2, [](auto f) { return GgufFile::parse(f); });
}

TEST(Fuzz, WrittenGguf) {
  fuzz(written_gguf(), 3, [](auto f) { return GgufFile::parse(f); });
}

}  // namespace
}  // namespace sd::io
