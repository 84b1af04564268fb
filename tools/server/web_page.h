// The page sd-server shows at / unless --serve-html-path names another: one
// self-contained HTML file (no build step, nothing fetched from elsewhere) that drives the
// native async API.
#pragma once

namespace sd::server {

extern const char* const kWebPage;

}  // namespace sd::server
