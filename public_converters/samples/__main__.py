"""Write the tiny native-layout copy of every public source (or the ones named) into one folder per source.

    python -m public_converters.samples --out build/demo/public_sources [--sources cholec80 endoscapes]

``make demo`` builds the public corpus from these (``sureon build public --source-root ...``).
"""

import argparse
from pathlib import Path

from builders.outputs import staged_output
from public_converters.spec import sample_writers


def main(argv=None) -> None:
    writers = sample_writers()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sources", nargs="+", choices=sorted(writers), default=sorted(writers))
    args = parser.parse_args(argv)
    for name in args.sources:
        with staged_output(args.out / name, overwrite=True) as staging:
            writers[name](staging)
    print(f"{len(args.sources)} sample sources in {args.out}")


if __name__ == "__main__":
    main()
