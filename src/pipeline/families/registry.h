// The families this build runs: the one list that names them all.
#pragma once

#include <vector>

#include "io/model_version.h"
#include "pipeline/families/family.h"

namespace sd::pipeline {

// The family object that runs `version`. Throws sd::Error naming the version and the
// families this build runs, for one it does not.
const Family& family_for(io::ModelVersion version);

// Every family this build runs, for messages and tests.
const std::vector<const Family*>& supported_families();

// The error family_for throws.
[[noreturn]] void fail_unsupported(io::ModelVersion version);

}  // namespace sd::pipeline
