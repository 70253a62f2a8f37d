# Paper: generated LaTeX inputs from the metrics, then latexmk. Without a TeX engine, `all` packs the sources and
# says how to build the PDF elsewhere. The ceilings' folders tell the paper where each dataset comes from
# (results/raw/<gpu>: this run; data/reference/<gpu>: the committed reference).


from rooflab.workers import run_main


rule paper_inputs:
    input:
        metrics="results/metrics.parquet",
        ceilings=get_ceilings,
        script="analysis/paper_inputs.py",
        kernel_docs=get_kernel_docs,
        repeatability=get_repeatability,
        traffic=get_traffic,
        ablations=get_ablations,
        backends=get_backends,
        why_ncu=get_why_ncu,
        compile_frames=get_compile_frames,
        profiles=get_profiles,
        compiled=get_compiled_facts,
        modules=get_modules_of("paper_inputs", "analysis/paper_inputs.py"),
    output:
        macros=update("results/paper/generated/macros.tex"),
        summary=update("results/paper/generated/table_summary.tex"),
        problems=update("results/paper/generated/table_problems.tex"),
        projection=update("results/paper/generated/table_projection.tex"),
        calibration=update("results/paper/generated/table_calibration.tex"),
        specs=update("results/paper/generated/table_specs.tex"),
        repeatability=update("results/paper/generated/table_repeatability.tex"),
        fixed_cost=update("results/paper/generated/table_fixed_cost.tex"),
        host_cost=update("results/paper/generated/table_host_cost.tex"),
        findings=update("results/paper/generated/table_findings.tex"),
        provenance=update("results/paper/generated/table_provenance.tex"),
        figures=update("results/paper/generated/figures.tex"),
        figures_projection=update("results/paper/generated/figures_projection.tex"),
        kernels=update("results/paper/generated/kernels.tex"),
        cpu=update("results/paper/generated/cpu.tex"),
        plateau=update("results/paper/generated/table_plateau.tex"),
        waves=update("results/paper/generated/table_waves.tex"),
        cost=update("results/paper/generated/table_cost.tex"),
        alignment=update("results/paper/generated/table_alignment.tex"),
        traffic=update("results/paper/generated/table_traffic.tex"),
        ablations=update("results/paper/generated/table_ablations.tex"),
        alignstudy=update("results/paper/generated/table_alignstudy.tex"),
        compile_frames=update("results/paper/generated/table_compile_frames.tex"),
        attention=update("results/paper/generated/attention.tex"),
        results=update("results/paper/generated/table_results.tex"),
        losses=update("results/paper/generated/table_losses.tex"),
        backend_losses=update("results/paper/generated/table_backend_losses.tex"),
        why_ncu=update("results/paper/generated/why_ncu.tex"),
        backends=update("results/paper/generated/table_backends.tex"),
    params:
        # the figures this DAG draws (the paper includes each that shows data): named, not waited for, so the
        # paper's inputs are written while the figures draw; paper_pdf waits for both. Sorted: a subset run lists
        # its kernels first, and a reordered list would rerun the job (params are a rerun trigger)
        figures=lambda wildcards: sorted(f for f in get_figures() if f.endswith(".pdf")),
    log:
        "logs/paper/inputs.log",
    priority: ANALYSIS_PRIORITY
    resources:
        host=1,
    run:
        run_main("analysis.paper_inputs", ["--metrics", input.metrics, "--ceilings", input.ceilings, "--figdir",
                                           "results/figures", "--figures", params.figures, "--outdir",
                                           "results/paper/generated", "--repeatability", input.repeatability,
                                           "--profiles", input.profiles, "--compiled", input.compiled, "--traffic",
                                           input.traffic, "--ablations", input.ablations,
                                           "--compile-frames", input.compile_frames, "--backends",
                                           input.backends, "--why-ncu", input.why_ncu], log)


rule paper_verdicts:
    """The paper's account of its verdicts: the A/A rates and the matrix product against cuBLAS timed apart and in
    pairs, with both sides' clocks (analysis/verdict_tables.py)."""
    input:
        aa=get_paired_aa,
        paired=get_paired_tables,
        floors=get_aa_floors,
        metrics="results/metrics.parquet",
        script="analysis/verdict_tables.py",
        code="analysis/aa_floors.py",
    output:
        aa=update("results/paper/generated/table_aa.tex"),
        aa_floors=update("results/paper/generated/table_aa_floors.tex"),
        matmul=update("results/paper/generated/table_matmul_verdicts.tex"),
        macros=update("results/paper/generated/macros_verdicts.tex"),
    params:
        verdicts=json.dumps(config.get("verdicts", {})),
    log:
        "logs/paper/verdicts.log",
    priority: ANALYSIS_PRIORITY
    resources:
        host=1,
    run:
        run_main("analysis.verdict_tables", ["--aa", input.aa, "--paired", input.paired, "--floors", input.floors,
                                             "--metrics",
                                             input.metrics, "--verdicts", params.verdicts, "--outdir",
                                             "results/paper/generated"], log)


rule paper_pdf:
    input:
        tex="paper/main.tex",
        bib="paper/references.bib",
        generated=rules.paper_inputs.output,
        verdicts=rules.paper_verdicts.output,
        projection_check=[rules.projection_check.output.table, rules.projection_check.output.macros],
        figures=get_figures,
        shapes=get_shapes_paper,
    output:
        update(report("results/paper/rooflab.pdf", category="Paper", caption="../report/paper.rst")),
    log:
        "logs/paper/latexmk.log",
    resources:
        host=1,
    conda:
        ENV
    shell:
        "latexmk -pdf -interaction=nonstopmode -halt-on-error -outdir=results/paper/build {input.tex} "
        "> {log} 2>&1 && cp results/paper/build/main.pdf {output}"


rule paper_sources:
    input:
        tex="paper/main.tex",
        bib="paper/references.bib",
        generated=rules.paper_inputs.output,
        verdicts=rules.paper_verdicts.output,
        projection_check=[rules.projection_check.output.table, rules.projection_check.output.macros],
        figures=get_figures,
        shapes=get_shapes_paper,
    output:
        tarball=update("results/paper/rooflab-paper-src.tar.gz"),
        howto=update("results/paper/BUILD_THE_PDF_ELSEWHERE.txt"),
    log:
        "logs/paper/sources.log",
    resources:
        host=1,
    conda:
        ENV
    shell:
        "(tar czf {output.tarball} {input.tex} {input.bib} {input.generated} {input.verdicts} {input.projection_check} {input.shapes} $(echo {input.figures} | tr ' ' '\\n' | grep '\\.pdf$') && "
        "printf '%s\\n' 'No TeX engine (latexmk + pdflatex) was found on this machine, so the PDF was not built.' "
        "'Everything it needs is in results/paper/rooflab-paper-src.tar.gz. On a machine with TeX Live:' "
        "'  mkdir paper-build && tar xzf rooflab-paper-src.tar.gz -C paper-build && cd paper-build' "
        "'  latexmk -pdf -outdir=results/paper/build paper/main.tex' "
        "'Debian/Ubuntu: apt-get install latexmk texlive-latex-recommended texlive-science lmodern' "
        "> {output.howto} && cat {output.howto}) > {log} 2>&1"
