import sys

from sureon.cli import main


sys.exit(main())
