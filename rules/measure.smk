# Measurement: per (gpu, kernel) one job for its cells, its kernel-launch profile and its compiled-kernel facts (one
# process: warm caches), plus the GPU's measured ceilings. A kernel's code (its folder kernels/<k>/ and the modules
# it imports: rooflab/kernel.kernel_code) is an input of its own job only, so editing it re-measures <k> only; as a
# code stamp (rules/common.smk code_stamp), so an edit of its comments or docstrings reruns nothing. The kernel wildcard
# is held to the run's kernels (MEASURED): another kernel's results from an earlier run are read as they are, never
# remade.
# Every timing job holds a measure_slot (run.sh: --resources measure_slot=<GPUs of the node, at least 1>), and on the
# CPU every host slot as well (host_slots): timing on the host runs alone, while figures and notebooks run in
# parallel with each other and beside a GPU's measurements. With one GPU or none there is one slot, so two never
# time at once; with several, each job takes a GPU of its own as it starts (rooflab/slots.py). A job that runs
# kernels untimed (ncu) holds a slot on a GPU (device_slot).


from rooflab.kernel import measurement_code
from rooflab.workers import run_main

MEASUREMENT_CODE = measurement_code()
MEASUREMENT_STAMP = code_stamp("measurement", MEASUREMENT_CODE)

if workflow.is_main_process and measure_slots() > 1:  # said in a dry run too
    print(f"rooflab: measure_slot={measure_slots()}: up to {measure_slots()} timing jobs at once, each on a GPU of "
          f"its own (rooflab/slots.py)", file=sys.stderr)


MEASURE_INPUT = dict(kernel=get_kernel_stamp, code=MEASUREMENT_STAMP,
                     describe=["experiments/profiles.py", "experiments/compiled.py", "rooflab/kernel_facts.py"])
MEASURE_OUTPUT = dict(raw=update("results/raw/{gpu}/{kernel}.parquet"),
                      profiles=update("results/raw/{gpu}/profiles/{kernel}.parquet"),
                      compiled=update("results/raw/{gpu}/compiled/{kernel}.parquet"),
                      paired=update("results/raw/{gpu}/paired/{kernel}.parquet"))
MEASURE_RESOURCES = dict(measure_slot=1, host=host_slots, gpu=get_gpu_count,
                         slurm_partition=get_cluster("slurm_partition"), constraint=get_cluster("constraint"),
                         gres=get_cluster("gres"), runtime=get_cluster("runtime", default=60))
SHAPES_INPUT = dict(kernel=get_kernel_stamp, code=MEASUREMENT_STAMP, shapes="rooflab/shapes.py")
SHAPES_OUTPUT = dict(raw=update("results/raw/{gpu}/shapes/{preset}/{kernel}.parquet"),
                     paired=update("results/raw/{gpu}/shapes/{preset}/paired/{kernel}.parquet"))
SHAPES_LOG = "logs/measure/{gpu}/shapes/{preset}/{kernel}.log"


rule measure:
    """The kernel's cells, then, in the same process (its caches, Inductor graphs and autotuner choices warm), the
    kernels one call of each (impl, dtype, pass) launches at config profile.size (the fusion evidence) and the
    registers, spills, shared memory, load widths and occupancy of every Triton kernel and config it launches."""
    input:
        **MEASURE_INPUT,
    output:
        **MEASURE_OUTPUT,
    params:
        sweep=lambda wildcards: rcfg.sweep_params(config),
    log:
        "logs/measure/{gpu}/{kernel}.log",
    priority: get_measure_priority
    # a job stopped by its stall watch (a cell that never returned: rooflab/lifeline.py) resumes from its cell store
    retries: 1
    wildcard_constraints:
        gpu=ON_A_GPU,
        kernel=MEASURED_SQUARE,
    resources:
        **MEASURE_RESOURCES,
    conda:
        ENV
    script:
        "../experiments/measure.py"


# On the CPU the same job runs experiments/measure.py's main in a warm worker (rooflab/workers.py, pool "host"):
# torch, triton and Inductor's first compile, about 9 s a process on 2 cores, are paid once a run, not once a
# kernel. It holds every host slot, so it still times alone. (A GPU's jobs stay processes of their own: each takes
# its GPU before torch is imported, rooflab/slots.py.)
rule measure_host:
    input:
        **MEASURE_INPUT,
    output:
        **MEASURE_OUTPUT,
    params:
        sweep=lambda wildcards: rcfg.sweep_params(config),
    log:
        "logs/measure/{gpu}/{kernel}.log",
    priority: get_measure_priority
    wildcard_constraints:
        gpu="cpu",
        kernel=MEASURED_SQUARE,
    resources:
        **MEASURE_RESOURCES,
    run:
        run_main("experiments.measure", measure_argv(wildcards, params, output), log, pool="host")


# The cells at the shapes of one set of config shapes other than square (llm, odd, custom: the set a wildcard, its
# shapes the params; rooflab/shapes.py), in a folder of their own: a run of one set keeps every other set's results.
# No launch profile or compiled facts: those describe the square sweep.
use rule measure as measure_shapes with:
    input:
        **SHAPES_INPUT,
    output:
        **SHAPES_OUTPUT,
    params:
        sweep=lambda wildcards: rcfg.sweep_params(config, wildcards.preset),
    log:
        SHAPES_LOG,
    wildcard_constraints:
        gpu=ON_A_GPU,
        kernel=MEASURED,
        preset=MEASURED_PRESETS,


use rule measure_host as measure_shapes_host with:
    input:
        **SHAPES_INPUT,
    output:
        **SHAPES_OUTPUT,
    params:
        sweep=lambda wildcards: rcfg.sweep_params(config, wildcards.preset),
    log:
        SHAPES_LOG,
    wildcard_constraints:
        gpu="cpu",
        kernel=MEASURED,
        preset=MEASURED_PRESETS,


# The sweep's cells at config repeatability's sizes, measured again in a process of their own once the sweep's job
# of the kernel is done: the between-process repeatability of this run's code (rule repeatability).
rule repeat_measure:
    input:
        **MEASURE_INPUT,
        sweep="results/raw/{gpu}/{kernel}.parquet",
    output:
        raw=update("results/raw/{gpu}/repeat/{kernel}.parquet"),
    params:
        sweep=lambda wildcards: rcfg.repeat_params(config),
    log:
        "logs/measure/{gpu}/repeat/{kernel}.log",
    retries: 1
    wildcard_constraints:
        gpu=ON_A_GPU,
        kernel=MEASURED_SQUARE,
    resources:
        **MEASURE_RESOURCES,
    conda:
        ENV
    script:
        "../experiments/measure.py"


rule ceilings:
    input:
        script="experiments/ceilings.py",
    output:
        update("results/raw/{gpu}/ceilings.parquet"),
    params:
        ceilings=lambda wildcards: {**config["ceilings"],
                                    **{k: config["timing"][k] for k in ("placements", "warm_translations", "instances")}},
    log:
        "logs/ceilings/{gpu}.log",
    # first (above every measure job's): a run cut short (a node's time limit) still has its own roofs for its cells
    priority: 1000
    resources:
        measure_slot=1,
        host=host_slots,
        gpu=get_gpu_count,
        slurm_partition=get_cluster("slurm_partition"),
        constraint=get_cluster("constraint"),
        gres=get_cluster("gres"),
        runtime=get_cluster("runtime", default=60),
    conda:
        ENV
    script:
        "../experiments/ceilings.py"


rule ncu:
    """Nsight Compute on one call of one cell (experiments/ncu_cell.py marks it with an NVTX range). The GPU's own
    clocks (--clock-control none), as in the sweep; the report is kept beside the CSV (.ncu-rep)."""
    input:
        kernel=get_kernel_stamp,
        code=MEASUREMENT_CODE,
        script="experiments/ncu_cell.py",
    output:
        csv=update("results/raw/{gpu}/ncu_{kernel}_{impl}_{dtype}_{size}.csv"),
        report=update("results/raw/{gpu}/ncu_{kernel}_{impl}_{dtype}_{size}.ncu-rep"),
    wildcard_constraints:
        impl="naive|builtin|compile|triton|cuda",
        dtype="float32|bfloat16|float16",
        size="[0-9]+",
    log:
        "logs/ncu/{gpu}/{kernel}_{impl}_{dtype}_{size}.log",
    resources:
        measure_slot=device_slot,
        host=1,
        gpu=get_gpu_count,
        slurm_partition=get_cluster("slurm_partition"),
        constraint=get_cluster("constraint"),
        gres=get_cluster("gres"),
        runtime=get_cluster("runtime", default=60),
    conda:
        ENV
    params:
        python=PYTHON,
    shell:
        "(command -v ncu >/dev/null || {{ echo 'ncu (Nsight Compute) is not on the PATH' >&2; exit 3; }}; "
        " ncu --clock-control none --nvtx --nvtx-include rooflab_cell/ --target-processes all --force-overwrite"
        " --export {output.report:q} {params.python} experiments/ncu_cell.py --gpu {wildcards.gpu:q}"
        " --kernel {wildcards.kernel:q} --impl {wildcards.impl:q} --dtype {wildcards.dtype:q} --size {wildcards.size}"
        " && ncu --import {output.report:q} --csv --page details > {output.csv:q}.tmp"
        " && mv {output.csv:q}.tmp {output.csv:q}) > {log:q} 2>&1"


rule traffic:
    """The bytes one call of each implementation moves through DRAM, for every kernel of the run, under Nsight
    Compute (experiments/traffic.py: one call each at config traffic.size and dtype, caches flushed before each
    kernel, split at marker kernels), beside the byte model's minimum: the paper's Table "Bytes one call moves".
    Off unless config traffic.enabled (ncu on the PATH; about a minute for the default kernels on the H200,
    without torch.compile, which it now profiles too)."""
    input:
        kernels=get_kernel_stamps,
        code=MEASUREMENT_CODE,
        script="experiments/traffic.py",
    output:
        table=update("results/raw/{gpu}/traffic.csv"),
        ncu=update("results/raw/{gpu}/traffic_ncu.csv"),
        calls=update("results/raw/{gpu}/traffic_calls.json"),
    params:
        python=PYTHON,
        kernels=" ".join(KERNELS),
        metrics=",".join(TRAFFIC_METRICS),
        caches=lambda wildcards: json.dumps(config.get("cache_dirs") or {}),
        size=lambda wildcards: config["traffic"]["size"],
        dtype=lambda wildcards: config["traffic"]["dtype"],
    wildcard_constraints:
        gpu="(?!cpu$)[a-z0-9_]+",
    log:
        "logs/traffic/{gpu}.log",
    resources:
        measure_slot=device_slot,
        host=1,
        gpu=get_gpu_count,
        slurm_partition=get_cluster("slurm_partition"),
        constraint=get_cluster("constraint"),
        gres=get_cluster("gres"),
        runtime=get_cluster("runtime", default=60),
    conda:
        ENV
    shell:
        "(command -v ncu >/dev/null || {{ echo 'ncu (Nsight Compute) is not on the PATH' >&2; exit 3; }}; "
        " ncu --clock-control none --cache-control all --profile-from-start off --target-processes application-only"
        " --csv --page raw"
        " --log-file {output.ncu:q} --metrics {params.metrics}"
        " {params.python} -m experiments.traffic run --gpu {wildcards.gpu:q} --kernels {params.kernels}"
        " --size {params.size} --dtype {params.dtype:q} --manifest {output.calls:q} --cache-dirs {params.caches:q}"
        " && {params.python} -m experiments.traffic table --ncu {output.ncu:q} --manifest {output.calls:q}"
        " --out {output.table:q}) > {log:q} 2>&1"


rule why_ncu:
    """What differs inside the kernels of the equal-bytes gaps and of our losses (experiments/why_ncu.py): one call
    of each implementation of each cell of config why_ncu.cells under Nsight Compute (--clock-control none), one row
    per GPU kernel launched (rooflab/ncu.py); the report, its raw CSV and the calls in results/raw/{gpu}/why_ncu/.
    Off unless config why_ncu.enabled (ncu on the PATH; about three minutes on the H200)."""
    input:
        kernels=get_kernel_stamps,
        code=MEASUREMENT_CODE,
        script=["experiments/why_ncu.py", "rooflab/ncu.py"],
    output:
        table=update("results/raw/{gpu}/why_ncu.parquet"),
        raw=update("results/raw/{gpu}/why_ncu/why_ncu_raw.csv"),
    params:
        python=PYTHON,
        cells=lambda wildcards: json.dumps(config["why_ncu"]["cells"]),
    wildcard_constraints:
        gpu="(?!cpu$)[a-z0-9_]+",
    log:
        "logs/why_ncu/{gpu}.log",
    resources:
        measure_slot=device_slot,
        host=1,
        gpu=get_gpu_count,
        slurm_partition=get_cluster("slurm_partition"),
        constraint=get_cluster("constraint"),
        gres=get_cluster("gres"),
        runtime=get_cluster("runtime", default=60),
    conda:
        ENV
    shell:
        "{params.python} -m experiments.why_ncu profile --gpu {wildcards.gpu:q} --cells {params.cells:q}"
        " --out {output.table:q} --raw-dir results/raw/{wildcards.gpu}/why_ncu > {log:q} 2>&1"


rule ablations:
    """The matrix product taken apart (experiments/ablations.py): tile, grouped order and the persistent TMA kernel
    at config ablations.sizes; the alignment study (odd sizes, tile quantisation, waves, padding) at
    ablations.align_sizes; GPU time, the sweep's timing. Off unless config ablations.enabled (about a minute on the
    H200)."""
    input:
        kernel=kernel_code_stamp("matmul"),
        code=MEASUREMENT_CODE,
        script="experiments/ablations.py",
    output:
        update("results/raw/{gpu}/ablations.parquet"),
    params:
        python=PYTHON,
        sizes=lambda wildcards: " ".join(map(str, config["ablations"]["sizes"])),
        align=lambda wildcards: " ".join(map(str, config["ablations"]["align_sizes"])),
        timing=lambda wildcards: json.dumps(config["timing"]),
        caches=lambda wildcards: json.dumps(config.get("cache_dirs") or {}),
    wildcard_constraints:
        gpu="(?!cpu$)[a-z0-9_]+",
    log:
        "logs/ablations/{gpu}.log",
    resources:
        measure_slot=1,
        host=1,
        gpu=get_gpu_count,
        slurm_partition=get_cluster("slurm_partition"),
        constraint=get_cluster("constraint"),
        gres=get_cluster("gres"),
        runtime=get_cluster("runtime", default=60),
    conda:
        ENV
    shell:
        "{params.python} -m experiments.ablations --gpu {wildcards.gpu:q} --sizes {params.sizes} --align-sizes {params.align}"
        " --timing {params.timing:q} --cache-dirs {params.caches:q} --out {output:q} > {log:q} 2>&1"


rule backends:
    """Our FlashAttention-2 beside each SDPA backend forced in turn (experiments/backends.py): flash, cuDNN and
    memory-efficient at config backends.shapes, causal and full, fwd and fwd+bwd; GPU time and the Python loop,
    the sweep's timing. Off unless config backends.enabled (about three minutes on the H200)."""
    input:
        kernel=kernel_code_stamp("attention"),
        code=MEASUREMENT_CODE,
        script="experiments/backends.py",
    output:
        update("results/raw/{gpu}/backends.parquet"),
    params:
        python=PYTHON,
        shapes=lambda wildcards: " ".join("x".join(map(str, s)) for s in config["backends"]["shapes"]),
        presets=lambda wildcards: " ".join(config["backends"]["presets"]),
        causal=lambda wildcards: " ".join(str(c).lower() for c in config["backends"]["causal"]),
        dtypes=lambda wildcards: " ".join(config["backends"]["dtypes"]),
        timing=lambda wildcards: json.dumps(config["timing"]),
        caches=lambda wildcards: json.dumps(config.get("cache_dirs") or {}),
    wildcard_constraints:
        gpu="(?!cpu$)[a-z0-9_]+",
    log:
        "logs/backends/{gpu}.log",
    resources:
        measure_slot=1,
        host=1,
        gpu=get_gpu_count,
        slurm_partition=get_cluster("slurm_partition"),
        constraint=get_cluster("constraint"),
        gres=get_cluster("gres"),
        runtime=get_cluster("runtime", default=60),
    conda:
        ENV
    shell:
        "{params.python} -m experiments.backends --gpu {wildcards.gpu:q} --shapes {params.shapes} --causal {params.causal}"
        " --presets {params.presets}"
        " --dtypes {params.dtypes} --timing {params.timing:q} --cache-dirs {params.caches:q} --out {output:q}"
        " > {log:q} 2>&1"
