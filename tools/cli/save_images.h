// Writing a run's images: sd.cpp's file names (cli/output_paths.h) and, unless
// --disable-image-metadata, the generation parameters embedded in each file
// (cli/image_params.h), with each image's own seed.
#pragma once

#include "cli/args.h"
#include "stable-diffusion.h"

namespace sd::cli {

// Creates the output folder if needed and writes every image that has pixels, each file
// whole or not at all. Returns false (after logging which) when an image could not be
// written; throws sd::Error when the output folder cannot be created.
// Before any heavy work: creates a missing output folder (saying so) and checks that every
// file a run of `count` images writes can be written. Throws sd::Error naming the path.
void check_outputs_writable(const Arguments& args, int count);

bool save_images(const Arguments& args, const sd_image_t* images, int count);

}  // namespace sd::cli
