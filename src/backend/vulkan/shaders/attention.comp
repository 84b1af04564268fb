// Attention for heads of up to 256 dims (the diffusion nets' and text encoders'): 16 queries
// per workgroup; a tile holds 32 keys of head size 64, 16 of 128, 8 of 256. 28 KiB of
// shared memory. The algorithm is in attention_body.glsl.
#version 450
#include "common.glsl"

#define ATTENTION_QUERY_ROWS 16
#define ATTENTION_MAX_HEAD_DIM 256
#define ATTENTION_MAX_TILE_KEYS 32
#define ATTENTION_KV_FLOATS 2112
#include "attention_body.glsl"
