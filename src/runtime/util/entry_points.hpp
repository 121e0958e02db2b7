// The entry points kagent-rt --help lists: every agents/*.lua under the root, each with the
// summary its own first line gives ("-- agents/NAME.lua: SUMMARY"), so the list has one source.
#pragma once

#include <string>

namespace kagent {

// The help text's section naming each entry point of root/agents with its one-line summary,
// sorted by name; "" when root has no agents folder.
std::string entry_points_help(const std::string& root);

}  // namespace kagent
