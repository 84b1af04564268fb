// Access checks every network server of the project shares (sd-rpc-server, sd-server): which
// hosts are loopback, and a token comparison whose time does not tell where it differs.
#pragma once

#include <string>

namespace sd::rpc {

// Compares a token in time that depends on its length only, not on where it differs.
bool same_secret(const std::string& given, const std::string& expected);

// True for 127.0.0.1, ::1, localhost and the rest of 127/8.
bool is_loopback_host(const std::string& host);

}  // namespace sd::rpc
