// Attention for heads of up to 128 dims (FLUX's, SD3.5's, the LLM-conditioned DiTs' and SD 1.5's second level),
// 2 threads per query. The algorithm is in attention_rows_body.glsl.
#version 450
#include "common.glsl"

#define ROW_LANES 2
#include "attention_rows_body.glsl"
