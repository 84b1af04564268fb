#include "pipeline/families/registry.h"

#include <string>

#include "tensor/error.h"

namespace sd::pipeline {

// Each family's object, defined in its own file.
const Family& sd1_family();
const Family& sd2_family();
const Family& sdxl_family();
const Family& sdxl_refiner_family();
const Family& flux_family();
const Family& sd3_family();
const Family& chroma_family();
const Family& z_image_family();
const Family& flux2_family();
const Family& qwen_image_family();
const Family& wan_family();

const std::vector<const Family*>& supported_families() {
  static const std::vector<const Family*> kAll = {
      &sd1_family(),   &sd2_family(),        &sdxl_family(),   &sdxl_refiner_family(),
      &flux_family(),  &sd3_family(),        &chroma_family(), &z_image_family(),
      &flux2_family(), &qwen_image_family(), &wan_family(),
  };
  return kAll;
}

const Family& family_for(io::ModelVersion version) {
  for (const Family* f : supported_families())
    if (f->runs(version)) return *f;
  fail_unsupported(version);
}

void fail_unsupported(io::ModelVersion version) {
  // Each family once, in the list's order (the SDXL refiner is SDXL's).
  std::vector<io::ModelFamily> families;
  for (const Family* f : supported_families())
    if (families.empty() || families.back() != f->id()) families.push_back(f->id());
  std::string names;
  for (size_t i = 0; i < families.size(); ++i)
    names += std::string(i == 0                     ? ""
                         : i + 1 == families.size() ? " and "
                                                    : ", ") +
             io::family_name(families[i]);
  fail("%s models are not supported yet; this build runs %s", io::version_name(version),
       names.c_str());
}

}  // namespace sd::pipeline
