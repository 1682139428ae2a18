#pragma once
// Private to dist/: a duration in seconds as people write it in messages ("5", "0.25", "300").
#include <cstdio>
#include <string>

namespace etnn::dist::detail {

inline std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

}  // namespace etnn::dist::detail
