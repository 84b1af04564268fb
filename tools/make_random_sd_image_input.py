#!/usr/bin/env python3
"""Write a random-weight SD 1.x/2.x/SDXL checkpoint whose UNet takes more input channels:
``make_random_sd.py``'s file with ``model.diffusion_model.input_blocks.0.0`` widened, the
layout of the released image-input variants:

  --in-channels 8   instruct-pix2pix (latent + the edited image's latent)
  --in-channels 9   inpainting (latent + mask + masked-image latent)

Every other tensor is the plain file's. Usage:
  make_random_sd_image_input.py --in-channels 8 --out pix2pix.safetensors [--arch sd15 ...]
Needs make_random_sd.py on the path or in --tools DIR (default: ../shared/tools beside the
repository, then this folder).
"""

import argparse
import dataclasses
import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--tools", default=os.path.join(here, "..", "..", "shared", "tools"))
    ap.add_argument("--in-channels", type=int, choices=[8, 9], required=True)
    known, rest = ap.parse_known_args()
    sys.path.insert(0, here)
    sys.path.insert(0, known.tools)
    import make_random_sd as sd  # noqa: E402

    for name, arch in sd.ARCHS.items():
        sd.ARCHS[name] = dataclasses.replace(
            arch, unet=dataclasses.replace(arch.unet, in_channels=known.in_channels))
    return sd.main(rest)


if __name__ == "__main__":
    sys.exit(main())
