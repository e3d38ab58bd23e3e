import sys

from .channels.cli import main

sys.exit(main())
