// Attention for heads of up to 512 dims (the VAEs' single-head mid-block attention): 4
// queries per workgroup, 8 keys per tile. 25 KiB of shared memory. The algorithm is in
// attention_body.glsl.
#version 450
#include "common.glsl"

#define ATTENTION_QUERY_ROWS 4
#define ATTENTION_MAX_HEAD_DIM 512
#define ATTENTION_MAX_TILE_KEYS 8
#define ATTENTION_KV_FLOATS 4104
#include "attention_body.glsl"
