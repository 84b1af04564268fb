// Where the engine looks for files a user downloads once and keeps (tokenizer
// vocabularies, compiled GPU pipelines): the sd-engine folder of the user's cache, $XDG_CACHE_HOME
// or ~/.cache.
#pragma once

#include <string>

namespace sd {

// `relative` inside that folder; empty when neither XDG_CACHE_HOME nor HOME is set.
std::string cache_folder_path(const std::string& relative);

}  // namespace sd
