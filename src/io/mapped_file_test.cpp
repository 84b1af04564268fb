#include "io/mapped_file.h"

#include <gtest/gtest.h>

#include <cstring>

#include "io/io_test_util.h"

namespace sd::io {
namespace {

using test::expect_error;
using test::TempDir;

TEST(MappedFile, MmapAndReadSeeTheSameBytes) {
  TempDir dir;
  auto bytes = test::random_bytes(100003, 7);
  test::write_file(dir.file("a.bin"), bytes);
  for (MapMode mode : {MapMode::Auto, MapMode::Mmap, MapMode::Read}) {
    auto f = MappedFile::open(dir.file("a.bin"), mode);
    ASSERT_EQ(f->size(), bytes.size());
    EXPECT_EQ(std::memcmp(f->data(), bytes.data(), bytes.size()), 0);
    EXPECT_EQ(f->is_mapped(), mode != MapMode::Read);
    EXPECT_EQ(f->path(), dir.file("a.bin"));
  }
}

TEST(MappedFile, EmptyFileHasNoBytes) {
  TempDir dir;
  test::write_file(dir.file("empty"), {});
  for (MapMode mode : {MapMode::Auto, MapMode::Read}) {
    auto f = MappedFile::open(dir.file("empty"), mode);
    EXPECT_EQ(f->size(), 0u);
  }
}

TEST(MappedFile, MissingFileNamesPathAndReason) {
  TempDir dir;
  expect_error([&] { MappedFile::open(dir.file("nope.safetensors")); },
               {dir.file("nope.safetensors"), "No such file or directory"});
}

TEST(MappedFile, DirectoryIsRefused) {
  TempDir dir;
  expect_error([&] { MappedFile::open(dir.path().string()); }, {dir.path().string(), "directory"});
}

TEST(MappedFile, FromMemoryKeepsNameAndBytes) {
  auto f = MappedFile::from_memory("mem.gguf", {1, 2, 3});
  EXPECT_EQ(f->path(), "mem.gguf");
  ASSERT_EQ(f->size(), 3u);
  EXPECT_EQ(f->data()[2], 3);
  EXPECT_FALSE(f->is_mapped());
}

}  // namespace
}  // namespace sd::io
