#!/usr/bin/env python3
"""Write a random-weight FLUX.1 Fill model: ``make_random_flux.py``'s four files with the
transformer's ``img_in`` taking 384 channels (the packed latent, the masked image's latent
and the 8x8-folded mask, 64 + 64 + 256), the layout of the released FLUX.1-Fill-dev.

Usage: make_random_flux_fill.py --out DIR [make_random_flux.py's options]. Needs
make_random_flux.py (and make_random_sd.py) on the path or in --tools DIR.
"""

import argparse
import os
import sys


def main():
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--tools", default=os.path.dirname(os.path.abspath(__file__)))
    known, rest = ap.parse_known_args()
    sys.path.insert(0, known.tools)
    import make_random_flux as flux  # noqa: E402

    plain = flux.dit_specs

    def fill_specs(hidden, *args, **kwargs):
        specs = plain(hidden, *args, **kwargs)
        return [(n, (hidden, 384) if n == "img_in.weight" else shape, kind)
                for n, shape, kind in specs]

    flux.dit_specs = fill_specs
    sys.argv = [sys.argv[0]] + rest
    flux.main()


if __name__ == "__main__":
    main()
