// The images a run reads (init image, mask, control image, references, PhotoMaker ids),
// prepared as sd.cpp prepares them: RGB (masks gray), fitted to the output size where the
// model needs that size, and the output size taken from the first image when -W/-H are
// not given.
#pragma once

#include <vector>

#include "cli/args.h"
#include "io/image.h"
#include "stable-diffusion.h"

namespace sd::cli {

struct InputImages {
  io::Image init;
  io::Image end;   // a video's last frame (--end-img)
  io::Image mask;  // always present: all white (repaint everything) when no --mask
  io::Image control;
  io::Image ip_adapter;
  std::vector<io::Image> refs;
  std::vector<io::Image> pm_ids;
  std::vector<io::Image> control_frames;  // --control-video, each fitted to the size

  // Backing arrays for the pointers attach_input_images hands out.
  std::vector<sd_image_t> ref_views;
  std::vector<sd_image_t> pm_id_views;
  std::vector<sd_image_t> control_frame_views;
};

// Reads every image `g` names. Sets g.width/g.height from the init (or first reference)
// image when they were not given, rounded up to a multiple of 8 with a warning. Throws
// sd::Error "<path>: <reason>" for an unreadable image.
InputImages load_input_images(const CliOptions& cli, GenerationOptions& g);

// --canny: the control image replaced by its edges, in place, with sd-cli's thresholds.
// False when the preprocessor refused the image (it logged why).
bool apply_canny(io::Image& control);

// Points the image fields of `params` at `inputs` (which must outlive the call that uses
// them).
void attach_input_images(InputImages& inputs, sd_img_gen_params_t& params);

// Points the image fields of a video request at `inputs`: the first frame (or a VACE
// reference), the last frame and the control video.
void attach_video_images(InputImages& inputs, sd_vid_gen_params_t& params);

// sd_image_t <-> io::Image. view_of shares the pixels; the others copy (copy_to_sd_image
// mallocs, as images handed to the C API are freed with free_sd_images).
sd_image_t view_of(io::Image& image);
sd_image_t copy_to_sd_image(const io::Image& image);
io::Image to_image(const sd_image_t& image);

}  // namespace sd::cli
