"""CSV and Markdown export of the comparison table: the exact text."""

from __future__ import annotations

from pathlib import Path

from apextui.core.measure.details import CorrectnessCheck
from apextui.core.measure.summary import Summary
from apextui.ui.export import CSV_COLUMNS, save_exports, to_csv, to_markdown
from apextui.core.results import ResultRow
from helpers import named


def row(preset: str, median: float, status: str = "ok", **summary) -> ResultRow:
    return ResultRow(preset=preset, workload="transformer", config=named("transformer", preset), device="cuda",
                     size="default",
                     status=status,
                     summary=Summary.from_dict({
                         "steps": 400, "measured_steps": 350, "median_ms": median, "p10_ms": median * 0.95,
                         "p90_ms": median * 1.05, "median_low_ms": median * 0.99, "median_high_ms": median * 1.01,
                         "throughput": 8192 / median * 1000, "throughput_unit": "tokens/s", "final_loss": 1.0681,
                         "loss_floor": 1.0475, "compile_s": None, **summary}))


ROWS = [row("fp32", 12.0), row("fused_amp", 5.0, error=None), row("torch_amp", 6.0, status="stopped")]


def test_csv_exact_text():
    text = to_csv(ROWS[:2])
    lines = text.splitlines()
    assert lines[0] == ",".join(CSV_COLUMNS)
    assert lines[1] == ("fp32 run 1,fp32,transformer,fp32,fp32,cuda,default,none,ok,400,350,12.0,11.4,"
                        "12.6,,,,"
                        "682666.7,,tokens/s,,,,base,,fp32 run 1,1.0681,1.0475,,,,"
                        "session,,False,,")  # the baseline: `base`, as on the screen, never a speed-up against itself
    # single runs one after another, none repeated: the interval is widened by the assumed drift (a factor of 2)
    assert lines[2] == ("fused_amp run 1,fused_amp,transformer,fused_amp,fp32,cuda,default,fp16,ok,400,350,5.0,4.75,"
                        "5.25,,,,1638400.0,,tokens/s,2.4,1.1762,4.897,faster,drift_unknown,fp32 run 1,1.0681,1.0475,,,,"
                        "session,,False,,")
    assert len(lines) == 3 and text.endswith("\n")


def test_csv_quotes_commas_and_newlines_in_errors():
    failed = row("fused_amp", 5.0, status="failed")
    failed = ResultRow(**{**failed.__dict__, "error": 'boom, "bad"\nline 2'})
    text = to_csv([failed])
    assert text.splitlines()[1].endswith(',session,"boom, ""bad""')
    assert 'line 2",False,,\n' in text


def test_csv_has_the_runs_mfu_and_its_achieved_rate():
    with_mfu = row("fp32", 12.0, mfu={"value": 0.31, "tflops": 306.7, "precision": "bf16", "reason": None})
    lines = to_csv([with_mfu, ROWS[1]]).splitlines()
    assert lines[1].endswith(",False,0.31,306.7")
    assert lines[2].endswith(",False,,")  # a run without one (an older file): empty cells


def test_markdown_exact_text():
    assert to_markdown(ROWS) == (
        "| run | preset | device | status | median ms | p10–p90 ms | speed-up | throughput | last loss (floor) "
        "| max err |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
        "| 1 | fp32 | cuda | ok | 12.0 | 11.4–12.6 | base | 683 k tokens/s | 1.068 (1.048) | — |\n"
        "| 1 | fused_amp | cuda | ok | 5.00 | 4.75–5.25 | 2.40× (1.18–4.90) | 1.64 M tokens/s | 1.068 (1.048) | — |\n"
        "| 1 | torch_amp | cuda | stopped | 6.00 | 5.70–6.30 | ≈2.00× (0.98–4.08) | 1.37 M tokens/s | 1.068 (1.048) "
        "| — |\n"
        "\n"
        "- transformer on cuda: single runs, one after another: drift unknown\n"
    )


def test_markdown_numbers_repeated_runs_and_puts_their_drift_in_the_interval():
    rows = [row("fp32", 12.0), row("fused_amp", 5.0), row("fp32", 13.2), row("fused_amp", 5.5)]
    lines = to_markdown(rows).splitlines()
    assert [line.split(" | ")[0:2] for line in lines[2:6]] == [["| 1", "fp32"], ["| 1", "fused_amp"],
                                                               ["| 2", "fp32"], ["| 2", "fused_amp"]]
    assert "base" in lines[2] and "base" not in lines[4]  # the fastest baseline run is the one compared against
    assert lines[-1].startswith("- transformer on cuda: drift between runs up to 10% (from 2 preset(s)")


def test_markdown_escapes_pipes_and_shows_the_norm_check():
    r = ResultRow(preset="a|b", workload="layer_norm", config=named("layer_norm", "fused_layernorm"), device="cpu",
                  size="cpu", status="ok",
                  summary=Summary(median_ms=0.5, check=CorrectnessCheck(max_abs_err=2.4e-7, passed=True)))
    line = to_markdown([r]).splitlines()[2]
    assert line == "| 1 | a\\|b | cpu | ok | 0.500 | — | — | — | — | 2.4e-07 |"


def test_save_exports_writes_both(tmp_path: Path):
    out = save_exports(ROWS, tmp_path, stem="x")
    assert out.csv == tmp_path / "x.csv" and out.markdown == tmp_path / "x.md"
    assert out.csv.read_text() == to_csv(ROWS) and out.markdown.read_text() == to_markdown(ROWS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv", "x.md"]
