// Mutation fuzzing: valid small files with random bytes flipped, overwritten, inserted or
// cut. Every variant must either parse (and then every tensor range lies inside the file)
// or fail with sd::Error naming the file. Fixed seeds keep failures reproducible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "io/fuzz_driver.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"

namespace sd::io {
namespace {

using test::Bytes;
using test::ByteWriter;
using test::fuzz_iterations;
using test::FuzzCounts;
using test::MutationAlphabet;
using test::run_fuzz;

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

Bytes fuzz_base_gguf() {
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
// Field values at their limits, and the bytes of JSON's syntax (safetensors headers).
const MutationAlphabet kAlphabet = {{0,
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
                                     ~uint64_t{0}},
                                    {'{', '}', '[', ']', '"', ':', ',', '-', '.', '0', '1',  '2',
                                     '3', '4', '5', '6', '7', '8', '9', 'e', 'E', ' ', '\\', 'u'},
                                    false};

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
  const int n = fuzz_iterations(5000);  // per base file: well under a second in all
  FuzzCounts c =
      run_fuzz(base, seed, n, kAlphabet, "fuzz.bin",
               [&](std::shared_ptr<const MappedFile> file) { check_parsed(parse(file)); });
  // Both outcomes must occur, or the mutations are too weak (or too strong) to test much.
  EXPECT_GT(c.parsed, n / 50);
  EXPECT_GT(c.refused, n / 2);
}

TEST(Fuzz, Safetensors) {
  fuzz(base_safetensors(), 1, [](auto f) { return SafetensorsFile::parse(f); });
}

TEST(Fuzz, HandBuiltGguf) {
  fuzz(fuzz_base_gguf(), 2, [](auto f) { return GgufFile::parse(f); });
}

TEST(Fuzz, WrittenGguf) {
  fuzz(written_gguf(), 3, [](auto f) { return GgufFile::parse(f); });
}

}  // namespace
}  // namespace sd::io
