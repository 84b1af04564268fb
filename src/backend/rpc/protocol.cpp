#include "backend/rpc/protocol.h"

#include <xxhash.h>

#include <cinttypes>

#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/op.h"

namespace sd::rpc {

wire::Manifest local_manifest() {
  wire::Manifest m;
  m.set_protocol(kProtocolVersion);
  for (int i = 0; i < kOpCount; ++i) m.add_ops(std::string(op_name(static_cast<Op>(i))));
  for (int i = 0; i < static_cast<int>(DType::Count); ++i)
    m.add_dtypes(std::string(dtype_name(static_cast<DType>(i))));
  m.set_layout(kLayout);
  return m;
}

namespace {

std::string joined(const google::protobuf::RepeatedPtrField<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ",") + n;
  return s;
}

}  // namespace

std::string manifest_mismatch(const wire::Manifest& peer, const char* peer_role) {
  const wire::Manifest mine = local_manifest();
  if (peer.protocol() != mine.protocol())
    return format(
        "this side speaks RPC protocol %u, the %s speaks %u; run the same release "
        "on both machines",
        mine.protocol(), peer_role, peer.protocol());
  if (peer.layout() != mine.layout())
    return format("tensor layout differs: here '%s', the %s '%s'", mine.layout().c_str(), peer_role,
                  peer.layout().c_str());
  if (joined(peer.ops()) != joined(mine.ops()))
    return format(
        "op sets differ: here [%s], the %s [%s]; run the same release on both "
        "machines",
        joined(mine.ops()).c_str(), peer_role, joined(peer.ops()).c_str());
  if (joined(peer.dtypes()) != joined(mine.dtypes()))
    return format("dtype sets differ: here [%s], the %s [%s]", joined(mine.dtypes()).c_str(),
                  peer_role, joined(peer.dtypes()).c_str());
  return {};
}

std::string ContentHash::hex() const {
  return format("%016" PRIx64 "%016" PRIx64, high, low);
}

ContentHash content_hash(const void* data, size_t size) {
  const XXH128_hash_t h = XXH3_128bits(data, size);
  return {h.high64, h.low64};
}

std::string human_bytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return format("%.2f GB", b / 1e9);
  if (b >= 1e6) return format("%.1f MB", b / 1e6);
  if (b >= 1e3) return format("%.0f KB", b / 1e3);
  return format("%" PRIu64 " B", bytes);
}

}  // namespace sd::rpc
