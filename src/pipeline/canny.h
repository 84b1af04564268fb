// The Canny edge detector (Canny 1986) as ControlNet's canny preprocessor runs it on a
// control image: grey, 5x5 Gaussian blur, Sobel gradients, non-maximum suppression and
// hysteresis, written back into every channel (white edges on black, or inverted).
// Computes what sd.cpp's preprocess_canny computes, quirks included, so --canny gives the
// same control image.
#pragma once

#include <cstdint>

namespace sd::pipeline {

struct CannyParams {
  float high_threshold = 0.08f;  // strong edges: at least this fraction of the largest gradient
  float low_threshold = 0.08f;   // weak edges: at least this fraction of the high threshold
  float weak = 0.8f;             // the value a weak edge takes before hysteresis
  float strong = 1.0f;           // the value of an edge
  bool inverse = false;          // black edges on white
};

// `pixels`: width x height interleaved 8-bit pixels of `channels` (3 or more; the first
// three are RGB), replaced by the edge map. Throws an sd::Error for fewer than 3 channels
// or an empty image.
void canny_edges(uint8_t* pixels, int width, int height, int channels, const CannyParams& params);

}  // namespace sd::pipeline
