// `sd-cli -M metadata --image FILE`: what an image file says about itself, as text or
// JSON, without loading a model. The flags keep stable-diffusion.cpp's meanings:
//   --metadata-format text|json  the report's form (default text);
//   --metadata-raw    hex previews of payloads (and EXIF values) left undecoded;
//   --metadata-brief  text values longer than 240 characters cut, with "...";
//   --metadata-all    structural entries too (PNG IHDR/IDAT/IEND, JPEG SOF/DQT/DHT/SOS,
//                     WebP VP8/VP8L/ALPH), not only metadata.
// When the file holds generation parameters (see io/image_parameters.h) the report starts
// with them split into prompt, negative prompt and settings.
#pragma once

#include <string>
#include <string_view>

namespace sd::api {

enum class MetadataFormat { Text, Json };

struct ImageInfoOptions {
  std::string image;                             // --image
  MetadataFormat format = MetadataFormat::Text;  // --metadata-format
  bool raw = false;                              // --metadata-raw
  bool brief = false;                            // --metadata-brief
  bool all = false;                              // --metadata-all
};

// "text" or "json" (case-insensitive); throws sd::Error naming both for anything else.
MetadataFormat parse_metadata_format(std::string_view name);

// The report, ending in a newline. Throws sd::Error "[metadata] ..." when no image is
// given, or "<path>: ..." when the file is missing or not a PNG, JPEG or WebP file. A
// damaged file is reported as far as it could be read, with a warning.
std::string describe_image_metadata(const ImageInfoOptions& options);

}  // namespace sd::api
