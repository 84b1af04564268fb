// The --llm text encoder of the LLM-conditioned families, read from the files: which decoder
// it is (Qwen3 has q/k norms and no q/k/v biases, Qwen2.5-VL's text model the other way
// round) checked against the one the family takes, and its dimensions.
#pragma once

#include <string>

#include "models/llm.h"
#include "pipeline/families/family.h"

namespace sd::pipeline {

// The --llm decoder as `preset` (its arch names the one expected) with every dimension from
// the files. Throws sd::Error naming --llm and `expected` ("Z-Image takes Qwen3-4B ...") when
// the file is another decoder or lacks a tensor.
models::LlmConfig llm_encoder_config(const ModelFiles& files, const models::LlmConfig& preset,
                                     const std::string& expected);

}  // namespace sd::pipeline
