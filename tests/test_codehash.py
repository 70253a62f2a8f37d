"""The cell store's key is the code, not the text: comments, docstrings and layout do not re-measure a kernel."""
import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

from rooflab.codehash import code_digest

REPO = Path(__file__).resolve().parent.parent

KERNEL = '''"""A kernel."""
import math


def f(x):
    """Doubles."""
    return 2 * x  # twice
'''


def _measure_module():
    spec = importlib.util.spec_from_file_location("measure_job", REPO / "experiments" / "measure.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("measure_job", mod)
    spec.loader.exec_module(mod)
    return mod


def test_comments_docstrings_and_layout_keep_the_digest(tmp_path):
    p = tmp_path / "k.py"
    p.write_text(KERNEL)
    before = code_digest([p])
    p.write_text(
        KERNEL.replace("# twice",
                       "# two times, a comment edit").replace('"""Doubles."""',
                                                              '"""Twice x."""').replace("return 2 * x", "return   2*x"))
    assert code_digest([p]) == before
    p.write_text(KERNEL.replace('    """Doubles."""\n', ""))  # a docstring removed
    assert code_digest([p]) == before


def test_a_code_edit_changes_the_digest(tmp_path):
    p = tmp_path / "k.py"
    p.write_text(KERNEL)
    before = code_digest([p])
    p.write_text(KERNEL.replace("2 * x", "3 * x"))
    assert code_digest([p]) != before
    p.write_text(KERNEL.replace("import math", "import math as m"))
    assert code_digest([p]) != before


def test_cuda_sources_count_as_text(tmp_path):
    # a comment-stripping normaliser made "#define A 1\n+2" and "#define A 1 +2" one program: CUDA is hashed as text
    p = tmp_path / "k.cu"
    p.write_text("#define A 1\n+2\n")
    before = code_digest([p])
    p.write_text("#define A 1 +2\n")
    assert code_digest([p]) != before


def test_the_cell_store_identity_follows_the_code(tmp_path):
    measure = _measure_module()
    src = tmp_path / "gelu.py"
    src.write_text(KERNEL)
    kernel = SimpleNamespace(source=str(src))
    params = {"timing": {"placements": 2}, "seed": 0, "interpret_max_size": 300}
    before = measure.checkpoint_identity(kernel, params)
    src.write_text(KERNEL.replace("# twice", "# a new comment"))
    assert measure.checkpoint_identity(kernel, params) == before
    assert measure.checkpoint_identity(kernel, {**params, "seed": 1}) != before
    src.write_text(KERNEL.replace("2 * x", "x + x"))
    assert measure.checkpoint_identity(kernel, params) != before


def test_a_kernels_code_is_its_folder_and_what_it_imports():
    """rooflab/kernel.kernel_code: from the imports, not a hand list; one kernel's table is no other kernel's code."""
    from rooflab.kernel import kernel_code, kernel_names

    code = {k: kernel_code(k) for k in kernel_names()}
    softmax = code["softmax"]
    for f in ("kernels/softmax/__init__.py", "kernels/softmax/table.py", "kernels/softmax/plan.py",
              "kernels/softmax/softmax.cu", "kernels/_shared/rows.py", "kernels/_shared/fastlaunch.py"):
        assert f in softmax, f
    assert not [f for f in softmax if f.startswith("kernels/layernorm/") or f.endswith("norm_bwd.py")]
    assert [k for k, files in code.items() if "kernels/softmax/table.py" in files] == ["softmax"]
    assert "kernels/_shared/rows.py" not in code["vecadd"]  # vecadd imports the elementwise helpers only
    assert {k for k, files in code.items() if "kernels/_shared/norm_bwd.py" in files} == {"layernorm", "rmsnorm"}
