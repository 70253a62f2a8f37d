import os

os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton: CPU tensors through the interpreter

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root: rooflab, kernels
