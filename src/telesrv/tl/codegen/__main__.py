"""``python -m telesrv.tl.codegen [out_dir]``: regenerate ``telesrv/tl/_generated``."""

import sys
from pathlib import Path

from telesrv.tl.codegen import OUT_DIR, write

if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT_DIR)
