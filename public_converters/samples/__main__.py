"""Write the tiny native-layout copy of every public source (or the ones named) into one folder per source.

    python -m public_converters.samples --out build/demo/public_sources [--sources cholec80 endoscapes]

``make demo`` builds the public corpus from these (``sureon build public --source-root ...``).
"""

import argparse
import shutil
from pathlib import Path

from public_converters.spec import sample_writers


def main(argv=None) -> None:
    writers = sample_writers()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sources", nargs="+", choices=sorted(writers), default=sorted(writers))
    args = parser.parse_args(argv)
    for name in args.sources:
        target = args.out / name
        partial = args.out / f".{name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        writers[name](partial)
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    print(f"{len(args.sources)} sample sources in {args.out}")


if __name__ == "__main__":
    main()
