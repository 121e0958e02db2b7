// Finding kagent.root: the folder holding agents/, skills/, prompts/ and src/gpu/eval/.
#pragma once

#include <string>

namespace kagent {

// KAGENT_ROOT if set; else the nearest ancestor of the executable that has agents/ and
// src/gpu/eval/ (a build tree inside a checkout, also when copied to another machine); else
// the source folder the binary was built from.
std::string find_root();

}  // namespace kagent
