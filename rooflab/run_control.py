"""What a snakemake run does around its jobs: the interpreter its shell rules call, the code stamps its measurement
jobs take as inputs, the background compile lanes it starts and stops, the record of a failed job's restored output,
and the one-screen summary at the end of ``all``.

The rule files (``rules/*.smk``) keep input functions only; they call this module with what it needs (the
``workflow`` object, the config), so each piece here is a plain function a test can call.
"""
from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path


def shell_python(workflow) -> str:
    """The interpreter every shell rule runs under: the one running snakemake (``sys.executable``), whether or not
    its environment is activated, so a rule never picks up another ``python`` from PATH. Under ``--use-conda`` (or
    ``--sdm conda``) a rule's own environment has its ``python`` first on PATH, and that one runs it, as snakemake's
    own ``script:`` directive chooses."""
    methods = {str(getattr(m, "name", m)).lower() for m in workflow.deployment_settings.deployment_method}
    return "python" if "conda" in methods else shlex.quote(sys.executable)
