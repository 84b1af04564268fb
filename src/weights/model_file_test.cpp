#include "weights/model_file.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "io/io_test_util.h"

namespace sd::weights {
namespace {

// A safetensors file whose 8-byte header length is 128 starts with byte 0x80, as a pickle
// stream does: the JSON at byte 8 says which it is.
TEST(ModelFile, SafetensorsWithAHeaderLengthEndingIn0x80IsNotAPickle) {
  const io::test::TempDir dir;
  const std::string path = dir.file("x.safetensors");
  std::string json = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  json.resize(128, ' ');
  {
    std::ofstream f(path, std::ios::binary);
    const uint64_t n = json.size();
    f.write(reinterpret_cast<const char*>(&n), sizeof n);
    f << json;
    const float v = 1.5f;
    f.write(reinterpret_cast<const char*>(&v), sizeof v);
  }
  const std::unique_ptr<ModelFile> file = open_model_file(path);
  ASSERT_EQ(file->tensors().size(), 1u);
  EXPECT_EQ(file->tensors()[0].name, "x");
}

}  // namespace
}  // namespace sd::weights
