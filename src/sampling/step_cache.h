// Step caching: fewer network evaluations than sampler calls. Between the sampler and the
// network sits a cache policy that decides, per call, whether the network runs or its
// result is reused or forecast (stable-diffusion.cpp's --cache-mode; its decision rules,
// so that the same flags skip the same evaluations):
// - ucache (ucache.h): reuses each conditioning's last residual (output - input) while
//   the estimated output change, accumulated over skipped steps, stays under a threshold;
// - spectrum (spectrum_forecast.h): forecasts the denoised latent from the last computed
//   ones (Chebyshev ridge fit blended with a Taylor step) on a growing window of calls.
// - easycache (easycache.h): as ucache, with a plainer rule, for transformers;
// - dbcache, taylorseer, cache-dit (cache_dit.h): one rule for the three, on the relative
//   change of the network's input, for transformers.
// ucache is for UNets only, the transformer modes for DiTs only, spectrum for both
// (cache_mode_fits).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace sd::sampling {

class DiscreteSchedule;

enum class CacheMode { None, UCache, Spectrum, EasyCache, DbCache, TaylorSeer, CacheDit };

// "ucache" -> CacheMode::UCache; throws sd::Error listing the modes for another name.
CacheMode parse_cache_mode(const std::string& name);
const char* cache_mode_name(CacheMode mode);
// Whether `mode` works on a UNet (`unet`) or a transformer (!unet); None fits both.
bool cache_mode_fits(CacheMode mode, bool unet);
// The modes that work on a UNet or a transformer, for messages: "ucache, spectrum".
std::string cache_modes_for(bool unet);

struct UCacheOptions {
  float threshold = 1.0f;  // accumulated relative output change allowed before a compute
  float start = 0.15f;     // caching runs from this fraction of the steps ...
  float end = 0.95f;       // ... to this one
  float decay = 1.0f;      // accumulated error is multiplied by this each step (0..1)
  bool relative = true;    // threshold relative to the output's size
  bool reset = true;       // a computed step clears the accumulated error
};

struct SpectrumOptions {
  float w = 0.40f;     // blend: 0 Taylor only, 1 Chebyshev only
  int m = 3;           // Chebyshev degree
  float lam = 1.0f;    // ridge regularization
  int window = 2;      // forecast all but every window-th call ...
  float flex = 0.50f;  // ... the window growing by this per computed call after warmup
  int warmup = 4;      // calls always computed first
  float stop = 0.9f;   // no forecasts past this fraction of the steps
};

// The transformer modes' options.
struct EasyCacheOptions {
  float threshold = 0.2f;
  float start = 0.15f;
  float end = 0.95f;
};
struct BlockCacheOptions {  // dbcache, taylorseer, cache-dit
  float threshold = 0.08f;  // relative input change below which a step is skipped
  int front_blocks = 8;     // Fn: scales the threshold (cache_dit.h)
  int back_blocks = 0;      // Bn: scales the threshold
  int warmup = 8;           // accepted as the reference does; no effect there either
};

struct CacheOptions {
  CacheMode mode = CacheMode::None;
  UCacheOptions ucache;
  SpectrumOptions spectrum;
  EasyCacheOptions easycache;
  BlockCacheOptions blocks;
};

// Parses --cache-option "key=value,..." for `mode` into `options`, strictly: a key the mode
// does not have, a value that is not a number, or one out of range is an sd::Error naming
// it and the keys the mode takes.
void parse_cache_options(CacheMode mode, const std::string& text, CacheOptions& options);
// Checks ranges (also for options set through the C API); throws sd::Error.
void check_cache_options(const CacheOptions& options);

// A policy over the network's raw outputs (ucache). The denoiser asks before each call
// with the network's input (x * c_in) and gets one output per conditioning to use instead,
// or nothing; after a call it tells what the network gave.
class OutputCache {
 public:
  virtual ~OutputCache() = default;
  // `step` as the sampler numbers its calls (samplers.h; <= 0: not a step's main call).
  virtual std::vector<std::vector<float>> reuse(int step, float sigma,
                                                const std::vector<float>& x_in,
                                                size_t conditionings) = 0;
  virtual void computed(int step, const std::vector<float>& x_in,
                        const std::vector<std::vector<float>>& outputs) = 0;
};

// A policy over the denoised latent (spectrum): forecast() fills `x0` (before any inpaint
// mask) and returns true when the network need not run; observe() is told every computed
// one.
class DenoisedForecast {
 public:
  virtual ~DenoisedForecast() = default;
  virtual bool forecast(std::vector<float>& x0) = 0;
  virtual void observe(const std::vector<float>& x0) = 0;
};

// The output cache of options.mode (ucache, easycache, dbcache, taylorseer, cache-dit) for
// one run over `sigmas`; null for the other modes.
std::unique_ptr<OutputCache> make_output_cache(const CacheOptions& options,
                                               const std::vector<float>& sigmas,
                                               const DiscreteSchedule& schedule);

}  // namespace sd::sampling
