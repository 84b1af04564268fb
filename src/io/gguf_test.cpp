#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "io/io_test_util.h"

namespace sd::io {
namespace {

using test::Bytes;
using test::ByteWriter;
using test::expect_error;
using test::GgufBuilder;
using test::TempDir;

GgufFile parse(const Bytes& b, const std::string& name = "test.gguf") {
  return GgufFile::parse(MappedFile::from_memory(name, b));
}

TEST(Gguf, ReadsEveryMetadataType) {
  GgufBuilder g;
  g.kv_scalar<uint8_t>("u8", 0, 200)
      .kv_scalar<int8_t>("i8", 1, -100)
      .kv_scalar<uint16_t>("u16", 2, 60000)
      .kv_scalar<int16_t>("i16", 3, -30000)
      .kv_scalar<uint32_t>("u32", 4, 4000000000u)
      .kv_scalar<int32_t>("i32", 5, -2000000000)
      .kv_scalar<float>("f32", 6, 1.5f)
      .kv_scalar<uint8_t>("bool", 7, 1)
      .kv_string("str", "h\xc3\xa9llo")
      .kv_scalar<uint64_t>("u64", 10, ~uint64_t{0})
      .kv_scalar<int64_t>("i64", 11, INT64_MIN)
      .kv_scalar<double>("f64", 12, -0.125);
  ByteWriter u32s;
  u32s.put<uint32_t>(4).put<uint64_t>(3).put<uint32_t>(7).put<uint32_t>(8).put<uint32_t>(9);
  g.kv("arr.u32", 9, u32s.b);
  ByteWriter strs;
  strs.put<uint32_t>(8).put<uint64_t>(2).str("a").str("");
  g.kv("arr.str", 9, strs.b);
  // [[1, 2], []] as an array of i16 arrays.
  ByteWriter nested;
  nested.put<uint32_t>(9).put<uint64_t>(2);
  nested.put<uint32_t>(3).put<uint64_t>(2).put<int16_t>(1).put<int16_t>(2);
  nested.put<uint32_t>(3).put<uint64_t>(0);
  g.kv("arr.nested", 9, nested.b);
  ByteWriter empty;
  empty.put<uint32_t>(12).put<uint64_t>(0);
  g.kv("arr.empty", 9, empty.b);

  GgufFile f = parse(g.bytes());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  ASSERT_EQ(f.metadata().size(), 16u);
  EXPECT_EQ(f.metadata()[0].first, "u8");  // file order
  EXPECT_EQ(f.get_u64("u8"), 200u);
  EXPECT_EQ(f.get_i64("i8"), -100);
  EXPECT_EQ(f.get_u64("u16"), 60000u);
  EXPECT_EQ(f.get_i64("i16"), -30000);
  EXPECT_EQ(f.get_u64("u32"), 4000000000u);
  EXPECT_EQ(f.get_i64("i32"), -2000000000);
  EXPECT_EQ(f.get_f64("f32"), 1.5);
  EXPECT_TRUE(f.get_bool("bool"));
  EXPECT_EQ(f.get_string("str"), "h\xc3\xa9llo");
  EXPECT_EQ(f.get_u64("u64"), ~uint64_t{0});
  EXPECT_EQ(f.get_i64("i64"), INT64_MIN);
  EXPECT_EQ(f.get_f64("f64"), -0.125);
  for (const char* k : {"u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64"}) {
    EXPECT_TRUE(f.value(k).is_integer()) << k;
  }
  EXPECT_EQ(f.value("i16").type(), GgufType::I16);

  const GgufValue& a = f.value("arr.u32");
  EXPECT_EQ(a.elem_type(), GgufType::U32);
  EXPECT_EQ(a.as_i64_array(), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(a.item(1), GgufValue::u32(8));
  EXPECT_EQ(a.to_string(), "[7, 8, 9]");
  EXPECT_EQ(f.value("arr.str").as_string_array(), (std::vector<std::string>{"a", ""}));
  const GgufValue& n = f.value("arr.nested");
  ASSERT_EQ(n.array_size(), 2u);
  EXPECT_EQ(n.items()[0].elem_type(), GgufType::I16);
  EXPECT_EQ(n.items()[0].as_i64_array(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(n.items()[1].array_size(), 0u);
  EXPECT_EQ(n.to_string(), "[[1, 2], []]");
  EXPECT_EQ(f.value("arr.empty").elem_type(), GgufType::F64);
  EXPECT_TRUE(f.tensors().empty());
}

TEST(Gguf, TypedGettersNameFileAndKey) {
  GgufBuilder g;
  g.kv_string("general.name", "x").kv_scalar<int32_t>("neg", 5, -1);
  GgufFile f = parse(g.bytes(), "model.gguf");
  expect_error([&] { f.get_u64("general.name"); },
               {"model.gguf", "'general.name'", "string", "integer"});
  expect_error([&] { f.get_string("general.missing"); }, {"model.gguf", "missing"});
  expect_error([&] { f.get_u64("neg"); }, {"model.gguf", "'neg'", "negative"});
  EXPECT_EQ(f.find_value("nope"), nullptr);
}

TEST(Gguf, ReadsTensorsOfEveryEngineDtype) {
  for (uint32_t version : {2u, 3u}) {
    GgufBuilder g;
    g.version = version;
    std::vector<Bytes> data;
    for (int i = 0; i < static_cast<int>(DType::Count); ++i) {
      auto dt = static_cast<DType>(i);
      uint64_t ne0 = static_cast<uint64_t>(block_size(dt)) * 2;
      data.push_back(test::random_bytes(row_size(dt, static_cast<int64_t>(ne0)) * 3, i));
      g.tensor("t." + std::string(dtype_name(dt)), {ne0, 3}, dtype_info(dt).gguf_id, data.back());
    }
    TempDir dir;
    test::write_file(dir.file("all.gguf"), g.bytes());
    GgufFile f = GgufFile::open(dir.file("all.gguf"));
    EXPECT_EQ(f.version(), version);
    EXPECT_EQ(f.data_offset() % 32, 0u);
    ASSERT_EQ(f.tensors().size(), static_cast<size_t>(DType::Count));
    for (int i = 0; i < static_cast<int>(DType::Count); ++i) {
      auto dt = static_cast<DType>(i);
      const TensorInfo& t = f.tensors()[static_cast<size_t>(i)];
      SCOPED_TRACE(std::string(dtype_name(dt)));
      EXPECT_EQ(t.dtype, dt);
      EXPECT_FALSE(t.needs_conversion());
      EXPECT_EQ(t.n_dims, 2);
      EXPECT_EQ(t.ne, (std::array<int64_t, 4>{block_size(dt) * 2, 3, 1, 1}));  // GGUF order
      EXPECT_EQ(t.size, data[static_cast<size_t>(i)].size());
      EXPECT_EQ(t.offset % 32, 0u);
      EXPECT_EQ(f.find(t.name), &t);
      EXPECT_EQ(std::memcmp(f.data(t), data[static_cast<size_t>(i)].data(), t.size), 0);
    }
  }
}

TEST(Gguf, PlainIntegerAndF64TensorsConvertOnLoad) {
  GgufBuilder g;
  int8_t i8[4] = {-1, 2, -3, 4};
  double f64[2] = {0.25, 3.0};
  g.tensor("i8", {4}, 24,
           Bytes(reinterpret_cast<uint8_t*>(i8), reinterpret_cast<uint8_t*>(i8) + 4));
  g.tensor("f64", {2}, 28,
           Bytes(reinterpret_cast<uint8_t*>(f64), reinterpret_cast<uint8_t*>(f64) + 16));
  GgufFile f = parse(g.bytes());
  const TensorInfo& a = *f.find("i8");
  EXPECT_EQ(a.file_dtype, FileDType::I8);
  EXPECT_EQ(a.dtype, DType::I32);
  int32_t out[4];
  load_tensor_data(a, f.data(a), out);
  EXPECT_EQ(out[2], -3);
  const TensorInfo& b = *f.find("f64");
  float fo[2];
  load_tensor_data(b, f.data(b), fo);
  EXPECT_EQ(fo[1], 3.0f);
}

TEST(Gguf, CustomAlignmentPlacesDataSection) {
  GgufBuilder g;
  g.alignment = 256;
  g.kv_scalar<uint32_t>("general.alignment", 4, 256);
  g.tensor("a", {8}, 0, test::random_bytes(32, 1)).tensor("b", {8}, 0, test::random_bytes(32, 2));
  GgufFile f = parse(g.bytes());
  EXPECT_EQ(f.alignment(), 256u);
  EXPECT_EQ(f.data_offset() % 256, 0u);
  EXPECT_EQ(f.find("b")->offset, f.data_offset() + 256);
}

TEST(Gguf, OldAndForeignFilesGetClearErrors) {
  GgufBuilder v1;
  v1.version = 1;
  expect_error([&] { parse(v1.bytes(), "old.gguf"); }, {"old.gguf", "version 1", "re-convert"});
  GgufBuilder be;
  be.version = 0x03000000;
  expect_error([&] { parse(be.bytes(), "be.gguf"); }, {"be.gguf", "big-endian"});
  GgufBuilder v4;
  v4.version = 4;
  expect_error([&] { parse(v4.bytes(), "v4.gguf"); }, {"v4.gguf", "version 4"});
  Bytes ggjt = {'t', 'j', 'g', 'g', 1, 0, 0, 0};
  expect_error([&] { parse(ggjt, "m.bin"); }, {"m.bin", "pre-GGUF"});
  test::SafetensorsBuilder st;
  expect_error([&] { parse(st.bytes(), "m.safetensors"); }, {"m.safetensors", "not a GGUF"});
}

TEST(Gguf, UnsupportedGgmlTypesAreNamed) {
  GgufBuilder g;
  g.tensor("blk.0.w", {256}, 16, test::random_bytes(66, 1));
  expect_error([&] { parse(g.bytes(), "iq.gguf"); }, {"iq.gguf", "'blk.0.w'", "iq2_xxs", "16"});
  GgufBuilder u;
  u.tensor("w", {32}, 99, test::random_bytes(64, 1));
  expect_error([&] { parse(u.bytes(), "u.gguf"); }, {"u.gguf", "'w'", "unknown type id 99"});
}

}  // namespace
}  // namespace sd::io
