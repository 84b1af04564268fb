// Tensor names of ESRGAN upscaler files, mapped onto Real-ESRGAN's (BasicSR's RRDBNet):
// conv_first, body.N.rdbR.convC, conv_body, conv_up1, conv_up2, conv_hr, conv_last.
//
// Files come in three spellings:
// - Real-ESRGAN's releases and their safetensors / GGUF conversions: those names;
// - Real-ESRGAN's training checkpoints (.pth): the same under "params_ema." (the EMA
//   weights, which inference uses) and often "params.", or under "module." (DataParallel);
// - the original ESRGAN code (RRDB_ESRGAN_x4.pth and most community models): one
//   Sequential, "model.0" the first conv, "model.1.sub.N.RDBR.convC.0" the dense-block
//   convs, "model.1.sub.<last>" the trunk conv, then the upsampling convs, the HR conv and
//   the last conv at increasing indices (parameter-free Upsample and LeakyReLU layers take
//   the indices in between).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace sd::io {

// Real-ESRGAN name -> the name as stored, for every tensor of an ESRGAN file; names that
// belong to no ESRGAN layer (a second, non-EMA copy; training state) are left out.
std::map<std::string, std::string> esrgan_tensor_names(const std::vector<std::string>& stored);

}  // namespace sd::io
