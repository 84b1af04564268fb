// The compute shaders compiled at build time (shaders/*.comp, embedded by
// cmake/embed_spirv.cmake), looked up by name.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace sd::vulkan {

struct ShaderBlob {
  std::string_view name;
  const unsigned char* spirv;
  size_t size;
};

const std::vector<ShaderBlob>& shader_blobs();

}  // namespace sd::vulkan
