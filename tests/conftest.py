import os

os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton: CPU tensors through the interpreter

