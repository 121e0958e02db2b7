// Merging one kagent-rt database into another: the rows a separate process wrote (a Slurm task
// with its own KAGENT_DB) join the main database once, whatever the number of merges.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "store/memory_store.hpp"

namespace kagent::store {

// Rows added to each table, in merge order (a table with none is listed with 0).
using MergeCounts = std::vector<std::pair<std::string, int64_t>>;

// Copies into `into` every row of the database at `source_path` that `into` lacks, in one
// transaction. Rows are matched on keys that do not depend on the file: the uid of runs,
// attempts, reflexions, skill outcomes, lessons and archived kernels; (run, round) for rounds;
// the name of a skill; the request key of an LLM reply. Integer references (run_id, parent_id,
// attempt_id, source_attempt, best_attempt, rounds.parents) are rewritten to the ids in `into`.
// A row present in both keeps `into`'s version, except that a run or round that finished later
// in the source takes its status, summary and finish time, and a skill takes the fields of its
// latest registration. So merging the same file again adds nothing.
// The source is migrated to this build's schema first (it is opened read-write for that).
// Throws DbError: no file at `source_path`, the same file as `into`, a newer schema, or `into`
// inside a transaction (SQLITE_MISUSE for the last one).
MergeCounts merge_database(MemoryStore& into, const std::string& source_path);

// The tables merge_database copies, each with the columns it fills (all but `id`), so a test
// can check that a table or column added to the schema is merged too.
std::vector<std::pair<std::string, std::vector<std::string>>> merged_columns();

}  // namespace kagent::store
