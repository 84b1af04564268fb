#include "io/gguf_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "io/gguf.h"
#include "io/io_test_util.h"

namespace sd::io {
namespace {

using test::Bytes;
using test::expect_error;
using test::TempDir;

std::vector<std::pair<std::string, GgufValue>> every_value_type() {
  float nan_payload;
  uint32_t bits = 0x7fa00001;  // a signalling NaN with a payload: must survive bit-exact
  std::memcpy(&nan_payload, &bits, 4);
  return {
      {"general.architecture", GgufValue::string("sd1")},
      {"u8", GgufValue::u8(255)},
      {"i8", GgufValue::i8(-128)},
      {"u16", GgufValue::u16(65535)},
      {"i16", GgufValue::i16(-32768)},
      {"u32", GgufValue::u32(0xffffffffu)},
      {"i32", GgufValue::i32(INT32_MIN)},
      {"f32", GgufValue::f32(nan_payload)},
      {"bool", GgufValue::boolean(true)},
      {"u64", GgufValue::u64(~uint64_t{0})},
      {"i64", GgufValue::i64(INT64_MIN)},
      {"f64", GgufValue::f64(-0.0)},
      {"tokens", GgufValue::string_array({"<|startoftext|>", "a</w>", ""})},
      {"scores", GgufValue::numeric_array(std::vector<float>{0.5f, -1.0f})},
      {"flags",
       GgufValue::array(GgufType::Bool, {GgufValue::boolean(false), GgufValue::boolean(true)})},
      {"nested",
       GgufValue::array(GgufType::Array,
                        {GgufValue::numeric_array(std::vector<int16_t>{1, -2}),
                         GgufValue::string_array({"x"}), GgufValue::array(GgufType::U8, {})})},
  };
}

// A source that writes `bytes` in uneven pieces, as a converter quantizing rows would.
GgufTensorSource chunked(const Bytes& bytes) {
  return [&bytes](GgufSink& out) {
    size_t pos = 0, step = 1;
    while (pos < bytes.size()) {
      size_t n = std::min(step, bytes.size() - pos);
      out.write(bytes.data() + pos, n);
      pos += n;
      step = step * 3 + 1;
    }
  };
}

TEST(GgufWriter, RoundTripIsExactForEveryDtypeAndValueType) {
  TempDir dir;
  GgufWriter w;
  auto meta = every_value_type();
  for (const auto& [k, v] : meta) w.add(k, v);
  std::vector<Bytes> data;
  std::vector<std::vector<int64_t>> shapes;
  for (int i = 0; i < static_cast<int>(DType::Count); ++i) {
    auto dt = static_cast<DType>(i);
    std::vector<int64_t> ne = {block_size(dt) * 3, 2, 1 + i % 3};
    if (i % 4 == 0) ne.push_back(2);
    int64_t rows = 1;
    for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
    data.push_back(test::random_bytes(row_size(dt, ne[0]) * static_cast<size_t>(rows), i));
    shapes.push_back(ne);
  }
  for (int i = 0; i < static_cast<int>(DType::Count); ++i) {
    auto dt = static_cast<DType>(i);
    w.add_tensor("t." + std::string(dtype_name(dt)), dt, shapes[i], chunked(data[i]));
  }
  w.write(dir.file("a.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("a.gguf.tmp")));

  GgufFile f = GgufFile::open(dir.file("a.gguf"));
  EXPECT_EQ(f.version(), 3u);
  ASSERT_EQ(f.metadata().size(), meta.size());
  for (size_t i = 0; i < meta.size(); ++i) {
    EXPECT_EQ(f.metadata()[i].first, meta[i].first);
    EXPECT_EQ(f.metadata()[i].second, meta[i].second)
        << meta[i].first << ": " << f.metadata()[i].second.to_string();
  }
  ASSERT_EQ(f.tensors().size(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    EXPECT_EQ(t.dtype, static_cast<DType>(i));
    EXPECT_EQ(t.n_dims, static_cast<int>(shapes[i].size()));
    for (size_t d = 0; d < shapes[i].size(); ++d) EXPECT_EQ(t.ne[d], shapes[i][d]);
    ASSERT_EQ(t.size, data[i].size());
    EXPECT_EQ(std::memcmp(f.data(t), data[i].data(), t.size), 0) << t.name;
  }

  // Read -> write reproduces the file byte for byte.
  GgufWriter again;
  for (const auto& [k, v] : f.metadata()) again.add(k, v);
  for (const TensorInfo& t : f.tensors()) {
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    again.add_tensor(t.name, t.dtype, ne,
                     [&f, &t](GgufSink& out) { out.write(f.data(t), t.size); });
  }
  again.write(dir.file("b.gguf"));
  EXPECT_EQ(test::read_file(dir.file("a.gguf")), test::read_file(dir.file("b.gguf")));
}

TEST(GgufWriter, MatchesHandBuiltBytes) {
  TempDir dir;
  Bytes a = test::random_bytes(18 * 2, 1), b = test::random_bytes(6, 2);
  GgufWriter w;
  w.add("general.architecture", GgufValue::string("sd1"));
  w.add("n", GgufValue::u32(7));
  w.add_tensor("a", DType::Q4_0, {64}, chunked(a));
  w.add_tensor("b", DType::F16, {3}, chunked(b));
  w.write(dir.file("w.gguf"));

  test::GgufBuilder g;
  g.kv_string("general.architecture", "sd1").kv_scalar<uint32_t>("n", 4, 7);
  g.tensor("a", {64}, 2, a).tensor("b", {3}, 1, b);
  Bytes want = g.bytes();
  while (want.size() % 32 != 0) want.push_back(0);  // the writer pads the last tensor
  EXPECT_EQ(test::read_file(dir.file("w.gguf")), want);
}

TEST(GgufWriter, AlignmentIsWrittenAndHonoured) {
  TempDir dir;
  GgufWriter w;
  w.set_alignment(128);
  Bytes a = test::random_bytes(40, 1), b = test::random_bytes(4, 2);
  w.add_tensor("a", DType::F32, {10}, chunked(a));
  w.add_tensor("b", DType::F16, {2}, chunked(b));
  w.write(dir.file("x.gguf"));
  GgufFile f = GgufFile::open(dir.file("x.gguf"));
  EXPECT_EQ(f.alignment(), 128u);
  EXPECT_EQ(f.get_u64("general.alignment"), 128u);
  EXPECT_EQ(f.data_offset() % 128, 0u);
  EXPECT_EQ(f.find("b")->offset - f.data_offset(), 128u);
  EXPECT_EQ(f.file().size() % 128, 0u);  // the last tensor is padded too
}

TEST(GgufWriter, FailedSourceLeavesNoFileAndKeepsTheOldOne) {
  TempDir dir;
  const std::string path = dir.file("m.gguf");
  test::write_file(path, {1, 2, 3});
  Bytes ok = test::random_bytes(16, 1);

  auto attempt = [&](GgufTensorSource bad, std::vector<std::string> parts) {
    GgufWriter w;
    w.add("general.name", GgufValue::string("x"));
    w.add_tensor("good", DType::F32, {4}, chunked(ok));
    w.add_tensor("bad", DType::F32, {4}, std::move(bad));
    expect_error([&] { w.write(path); }, parts);
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    EXPECT_EQ(test::read_file(path), (Bytes{1, 2, 3}));
  };
  attempt([](GgufSink& out) { out.write("abcd", 4); }, {path, "'bad'", "wrote 4 of its 16"});
  Bytes big(17);
  attempt([&](GgufSink& out) { out.write(big.data(), big.size()); },
          {path, "'bad'", "more than its 16"});
  attempt([](GgufSink&) { throw Error("converter: cannot quantize 'bad'"); }, {"cannot quantize"});
}

TEST(GgufWriter, UnwritableDirectoryNamesPath) {
  GgufWriter w;
  expect_error([&] { w.write("/nonexistent-dir/m.gguf"); },
               {"/nonexistent-dir/m.gguf.tmp", "No such file or directory"});
}

TEST(GgufWriter, RejectsBadArguments) {
  auto src = [](GgufSink&) {};
  GgufWriter w;
  w.add("k", GgufValue::u8(1));
  EXPECT_THROW(w.add("k", GgufValue::u8(2)), Error);
  EXPECT_THROW(w.add("general.alignment", GgufValue::u32(48)), Error);
  EXPECT_THROW(w.add("general.alignment", GgufValue::u64(64)), Error);
  EXPECT_THROW(w.set_alignment(0), Error);
  w.add_tensor("t", DType::F32, {4}, src);
  EXPECT_THROW(w.add_tensor("t", DType::F32, {4}, src), Error);
  EXPECT_THROW(w.add_tensor("u", DType::F32, {}, src), Error);
  EXPECT_THROW(w.add_tensor("u", DType::F32, {1, 1, 1, 1, 1}, src), Error);
  EXPECT_THROW(w.add_tensor("u", DType::F32, {-1}, src), Error);
  EXPECT_NO_THROW(w.add_tensor("empty", DType::F32, {0}, src));  // legal: no bytes
  EXPECT_THROW(w.add_tensor("u", DType::Q4_0, {16}, src), Error);
  EXPECT_THROW(w.add_tensor("u", DType::F32, {INT64_MAX, INT64_MAX}, src), Error);
  EXPECT_THROW(w.add_tensor("u", DType::F32, {4}, nullptr), Error);
  EXPECT_THROW(GgufValue::array(GgufType::U8, {GgufValue::i8(1)}), Error);
}

}  // namespace
}  // namespace sd::io
