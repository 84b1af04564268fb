// Attention for heads of up to 64 dims (SDXL's, SD3's and SD 1.5's first level),
// 1 thread per query. The algorithm is in attention_rows_body.glsl.
#version 450
#include "common.glsl"

#define ROW_LANES 1
#include "attention_rows_body.glsl"
