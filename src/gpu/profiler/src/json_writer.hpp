// Minimal JSON output: the library only ever writes flat records of strings and numbers, so a
// dependency on a JSON library (absent on the GPU image) is not worth it.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace kp {

inline void json_string(std::string& out, const std::string& s) {
    out += '"';
    for (unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            case '\r': out += "\\r"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    out += '"';
}

// NaN/Inf are not JSON; CUPTI yields NaN for ratios with a zero denominator.
inline void json_number(std::string& out, double v) {
    if (!std::isfinite(v)) {
        out += "null";
        return;
    }
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    out += buf;
}

inline void json_int(std::string& out, long long v) { out += std::to_string(v); }

}  // namespace kp
