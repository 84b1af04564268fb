// Attention for heads of up to 256 dims (SD 1.5's and SD 2's deepest levels, the text encoders'),
// 4 threads per query. The algorithm is in attention_rows_body.glsl.
#version 450
#include "common.glsl"

#define ROW_LANES 4
#include "attention_rows_body.glsl"
