"""The doctor report as lines of styled segments: one rendering for `apextui doctor` (plain or Rich colour) and
the TUI's full-report screen and status pane, so the two never drift apart.

Styles are Rich style strings, but nothing here imports Rich (or Textual): the front ends turn the segments
into their own text objects."""

from __future__ import annotations

from apextui.core.monitor.topology import matrix

from .doctor_report import DoctorReport, Environment

Segment = tuple[str, str | None]  # (text, rich style or None)

# The Apex status words' styles: shared by this rendering and the TUI's one-line status.
STATUS_STYLE = {
    "complete": "bold green", "partial": "bold yellow", "python_only": "bold red", "import_fails": "bold red",
    "not_nvidia": "bold red", "not_installed": "bold red",
}
EXT_STYLE = {"ok": "green", "missing": "yellow", "broken": "bold red"}



def _na(value: object, none: str = "n/a") -> str:
    return none if value is None or value == "" else str(value)


def _yes_no(value: bool | None) -> str:
    return "n/a" if value is None else ("yes" if value else "no")


def _gpu_lines(env: Environment) -> list[tuple[str, Segment]]:
    """(label, segment) rows: how many GPUs, NCCL, and how the GPUs are linked (a matrix when not uniform)."""
    topo = env.topology
    seen = len(env.gpus)
    on_machine = f", {topo.gpus} on this machine (NVML)" if topo is not None and topo.gpus != seen else ""
    who = "torch" if env.cuda_available else "NVML"
    nccl = ("NCCL", (env.nccl, None) if env.nccl else (f"n/a ({env.nccl_error or 'unknown'})", "dim"))
    if seen == 0 and (topo is None or topo.gpus == 0):  # the GPU row above says there is none
        return [nccl]
    out: list[tuple[str, Segment]] = [("GPUs", (f"{seen} visible to {who}{on_machine}", None)), nccl]
    if topo is None:
        out.append(("GPU links", ("n/a", "dim")))
        return out
    style = {"nvlink": "green", "nvswitch": "green", "pcie": "yellow", "mixed": "yellow", "n/a": "dim"}
    out.append(("GPU links", (topo.summary, style.get(topo.kind))))
    if topo.kind == "mixed" or any(link.kind == "n/a" for link in topo.links):
        out.extend(("", (line, None)) for line in matrix(topo))
    return out


def render_lines(report: DoctorReport) -> list[list[Segment]]:
    """The human report as lines of styled segments."""
    env, apex = report.environment, report.apex
    out: list[list[Segment]] = []
    head = lambda text: out.append([(text, "bold")])  # noqa: E731
    row = lambda label, *segs: out.append([(f"  {label:<10} ", "dim"), *segs])  # noqa: E731

    out.append([("apextui doctor", "bold"), (" - NVIDIA Apex fused kernels on this machine", None)])
    head("Environment")
    row("Python", (f"{env.python}  {env.python_executable}", None))
    if env.torch is None:
        row("torch", ("cannot be imported: " + env.torch_error, "red"))
    else:
        cuda = f"CUDA {env.torch_cuda}" if env.torch_cuda else "CPU-only build"
        row("torch", (f"{env.torch}  {cuda}  cuDNN {_na(env.cudnn)}", None))
    if env.gpus:
        for g in env.gpus:
            mem = f"  {g.memory_gib:g} GiB" if g.memory_gib is not None else ""
            row(f"GPU {g.index}", (f"{g.name}  compute capability {_na(g.capability)}{mem}", None))
    else:
        why = f" ({env.cuda_error})" if env.cuda_error else ""
        row("GPU", (f"none visible to torch{why}", "yellow"))
    for line in _gpu_lines(env):
        row(*line)
    row("driver", (f"{_na(env.driver)}  NVML {env.nvml}", None))
    if env.nvcc_version:
        unknown = "torch is a CPU-only build" if env.torch and not env.torch_cuda else "torch CUDA unknown"
        match = {True: ("matches torch", "green"), False: (f"!= torch CUDA {env.torch_cuda}", "bold red"),
                 None: (unknown, "dim")}[env.nvcc_matches_torch]
        row("nvcc", (f"{env.nvcc_version}  {env.nvcc_path}  ", None), match)
    else:
        row("nvcc", (f"not found ({env.nvcc_error})", "yellow"))
    row("TF32/bf16", (f"{_yes_no(env.tf32_supported)} / {_yes_no(env.bf16_supported)}", None))

    out.append([("Apex", "bold"), ("       ", None),
                (apex.status.upper().replace("_", " "), STATUS_STYLE.get(apex.status))])
    if apex.location:
        dist = f"{apex.distribution} {apex.version or ''}".strip() if apex.distribution else (
            f"version {apex.version}" if apex.version else "no package metadata")
        row("location", (f"{apex.location}  ({dist})", None))
    row("status", (apex.detail, None))
    if apex.import_error:
        row("import", (apex.import_error, "red"))

    # columns as wide as their longest name (+2): a long extension name never runs into its path
    ext_w = max([34] + [len(e.name) + 2 for e in report.extensions])
    feat_w = max([20] + [len(f.name) + 2 for f in report.features])
    smoke_w = max([16] + [len(s.name) + 2 for s in report.smoke])
    head("Compiled extensions")
    for e in report.extensions:
        why = "" if e.status == "ok" else (e.reason if e.kind == "missing" else f"{e.kind}: {e.reason}")
        out.append([(f"  {e.status:<8} ", EXT_STYLE.get(e.status)), (e.name.ljust(ext_w), None),
                    (why if why else (e.path or ""), None if why else "dim")])
    head("Features")
    exts = {e.name: e for e in report.extensions}
    for f in report.features:
        where = f"{f.module}.{f.attr}" if f.attr else f.module
        mark = ("ok", "green") if f.ok else ("no", "bold red" if not f.removed else "yellow")
        needs = f" [{', '.join(f.needs)}]" if f.needs else ""
        detail = f"  {f.reason}" if f.reason else ""
        bad = [exts[n] for n in f.needs if n in exts and exts[n].status != "ok"]
        if not f.ok and bad and f.reason.startswith(f"needs {bad[0].name}"):  # details are in the rows above
            e = bad[0]
            detail = f"  needs {e.name}, which is {e.status}" + (f" ({e.kind})" if e.kind != "missing" else "")
        out.append([(f"  {mark[0]:<4} ", mark[1]), (f.name.ljust(feat_w), None), (f"{where}{needs}", "dim"),
                    (detail, None)])
    head("Smoke tests (CUDA, vs torch)")
    for s in report.smoke:
        if s.skipped:
            out.append([("  skip ", "dim"), (s.name.ljust(smoke_w), None), (s.reason, "dim")])
        elif s.passed:
            out.append([("  pass ", "green"), (s.name.ljust(smoke_w), None),
                        (f"max abs err {s.max_abs_err:.2e} (tol {s.tolerance:g})  {s.seconds or 0:.2f} s", None)])
        else:
            out.append([("  FAIL ", "bold red"), (s.name.ljust(smoke_w), None), (s.reason, None)])

    if report.problems:
        head(f"Problems ({len(report.problems)})")
        for i, p in enumerate(report.problems, 1):
            out.append([(f"  {i}. ", "bold red"), (p.what, None)])
            out.append([("     fix: ", "bold cyan"), (p.fix or "-", None)])
    else:
        out.append([("No problems found.", "bold green")])
    out.append([(f"(probe took {report.seconds:.1f} s; risky imports ran in a {report.isolation})", "dim")])
    return out
