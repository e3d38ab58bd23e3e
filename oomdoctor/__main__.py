import sys

from .channels import mcp
from .channels.cli import main

sys.exit(main(commands={"mcp": mcp.command}))
