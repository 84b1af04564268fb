// Attention for heads of up to 512 dims (the VAEs' single-head mid-block attention), 8
// threads per query. The algorithm is in attention_rows_body.glsl.
#version 450
#include "common.glsl"

#define ROW_LANES 8
#include "attention_rows_body.glsl"
