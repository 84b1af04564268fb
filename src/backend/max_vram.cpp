#include "backend/max_vram.h"

#include <cctype>
#include <cmath>

#include "tensor/error.h"
#include "tensor/text.h"

namespace sd {

namespace {

double parse_gib(std::string_view text, std::string_view entry) {
  std::optional<float> v = parse_finite_float(trim(text));
  SD_CHECK(v && std::fabs(*v) <= 1 << 20,
           "--max-vram: '%.*s' is not a number of GiB; give e.g. 6, -1 (free memory less "
           "1 GiB), 0 (no budget) or RPC0=1,cuda0=6",
           static_cast<int>(entry.size()), entry.data());
  return *v;
}

}  // namespace

MaxVram parse_max_vram(std::string_view spec) {
  MaxVram out;
  if (trim(spec).empty()) return out;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string_view::npos) end = spec.size();
    const std::string entry_text = trim(spec.substr(start, end - start));
    const std::string_view entry = entry_text;
    start = end + 1;
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) {
      out.all = parse_gib(entry, entry);
      continue;
    }
    const std::string device = ascii_lower(trim(entry.substr(0, eq)));
    SD_CHECK(!device.empty(), "--max-vram: '%.*s' names no device; write DEVICE=GiB",
             static_cast<int>(entry.size()), entry.data());
    const double gib = parse_gib(entry.substr(eq + 1), entry);
    if (device == "all" || device == "default" || device == "*")
      out.all = gib;
    else
      out.by_device[device] = gib;
  }
  if (out.all && *out.all == 0) out.all.reset();
  for (auto it = out.by_device.begin(); it != out.by_device.end();)
    it = it->second == 0 ? out.by_device.erase(it) : std::next(it);
  return out;
}

size_t MaxVram::bytes_for(const Device& device) const {
  auto it = by_device.find(ascii_lower(device.name()));
  const std::optional<double> gib = it != by_device.end() ? std::optional(it->second) : all;
  if (!gib || *gib == 0) return 0;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  if (*gib > 0) return static_cast<size_t>(*gib * kGiB);
  const DeviceMemory m = device.memory();
  const double spare = -*gib * kGiB;
  SD_CHECK(static_cast<double>(m.free) > spare,
           "--max-vram %g: %s has %.2f GiB free, not more than the %.2f GiB to spare; spare "
           "less (e.g. --max-vram -0.5) or give a budget in GiB",
           *gib, device.name().c_str(), static_cast<double>(m.free) / kGiB, -*gib);
  return static_cast<size_t>(static_cast<double>(m.free) - spare);
}

}  // namespace sd
