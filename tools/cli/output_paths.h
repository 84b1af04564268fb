// Where sd-cli writes a run's images, named as sd.cpp names them:
//   - an output path with a printf-style index ("out_%03d.png"; "%%" is a literal '%')
//     numbers every image from --output-begin-idx;
//   - otherwise one image goes to the path itself and several to "<stem>_<index><ext>";
//   - a path whose extension is not an image format (.png, .jpg/.jpeg/.jpe, .webp) gets
//     ".png" appended.
#pragma once

#include <string>
#include <vector>

namespace sd::cli {

// Whether `path` holds an unescaped %d-style specifier (up to three width digits).
bool has_index_specifier(const std::string& path);

// `pattern` with every %d-style specifier formatted with `index`, then "%%" -> "%".
std::string format_index(const std::string& pattern, int index);

std::vector<std::string> output_paths(const std::string& output, int count, int begin_index);

}  // namespace sd::cli
