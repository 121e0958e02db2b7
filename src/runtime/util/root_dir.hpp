// Finding kagent.root: the folder holding agents/, skills/, prompts/ and the evaluator.
#pragma once

#include <string>

namespace kagent {

// KAGENT_ROOT if set; else, from the executable's own location (/proc/self/exe):
//   - <exe dir>/../share/kagent-rt (an installed or unpacked package, wherever its prefix is),
//   - the nearest ancestor that has agents/ and src/gpu/eval/ (a build tree inside a checkout,
//     also when copied to another machine);
// else the install prefix's share/kagent-rt (a program embedding kagent::core), else the source
// folder the binary was built from.
std::string find_root();

}  // namespace kagent
