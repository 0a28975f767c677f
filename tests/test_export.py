"""CSV and Markdown export of the comparison table: the exact text."""

from __future__ import annotations

from pathlib import Path

from apextui.ui.export import CSV_COLUMNS, save_exports, to_csv, to_markdown
from apextui.core.results import ResultRow


def row(preset: str, median: float, status: str = "ok", **summary) -> ResultRow:
    return ResultRow(preset=preset, workload="transformer", variant=preset, device="cuda", size="default",
                     amp="none", status=status,
                     summary={"steps": 400, "measured_steps": 350, "median_ms": median, "p10_ms": median * 0.95,
                              "p90_ms": median * 1.05, "median_low_ms": median * 0.99,
                              "median_high_ms": median * 1.01, "throughput": 8192 / median * 1000,
                              "throughput_unit": "tokens/s", "final_loss": 1.0681, "loss_floor": 1.0475,
                              "compile_s": None, **summary})


ROWS = [row("fp32", 12.0), row("fused_amp", 5.0, error=None), row("torch_amp", 6.0, status="stopped")]


def test_csv_exact_text():
    text = to_csv(ROWS[:2])
    lines = text.splitlines()
    assert lines[0] == ",".join(CSV_COLUMNS)
    assert lines[1] == ("fp32,transformer,fp32,fp32,cuda,default,none,ok,400,350,12.0,11.399999999999999,"
                        "12.600000000000001,,,,"
                        "682666.6666666666,tokens/s,1.0,0.9802,1.0202,within_noise,fp32 run 1,1.0681,1.0475,,,,"
                        "session,")  # the baseline against itself, as in the saved JSON
    assert lines[2] == ("fused_amp,transformer,fused_amp,fp32,cuda,default,none,ok,400,350,5.0,4.75,5.25,,,,"
                        "1638400.0,tokens/s,2.4,2.3525,2.4485,faster,fp32 run 1,1.0681,1.0475,,,,session,")
    assert len(lines) == 3 and text.endswith("\n")


def test_csv_quotes_commas_and_newlines_in_errors():
    failed = row("fused_amp", 5.0, status="failed")
    failed = ResultRow(**{**failed.__dict__, "error": 'boom, "bad"\nline 2'})
    text = to_csv([failed])
    assert text.splitlines()[1].endswith(',session,"boom, ""bad""')
    assert 'line 2"' in text


def test_markdown_exact_text():
    assert to_markdown(ROWS) == (
        "| preset | device | status | median ms | p10–p90 ms | speed-up | throughput | loss/floor | max err |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
        "| fp32 | cuda | ok | 12.0 | 11.4–12.6 | base | 683 k tokens/s | 1.068/1.048 | — |\n"
        "| fused_amp | cuda | ok | 5.00 | 4.75–5.25 | 2.40× (2.35–2.45) | 1.64 M tokens/s | 1.068/1.048 | — |\n"
        "| torch_amp | cuda | stopped | 6.00 | 5.70–6.30 | 2.00× (1.96–2.04) | 1.37 M tokens/s | 1.068/1.048 | — |\n"
    )


def test_markdown_escapes_pipes_and_shows_the_norm_check():
    r = ResultRow(preset="a|b", workload="norm", variant="fused_layernorm", device="cpu", size="cpu", amp="none",
                  status="ok", summary={"median_ms": 0.5, "check": {"max_abs_err": 2.4e-7, "passed": True}})
    line = to_markdown([r]).splitlines()[2]
    assert line == "| a\\|b | cpu | ok | 0.500 | — | — | — | — | 2.4e-07 |"


def test_save_exports_writes_both(tmp_path: Path):
    out = save_exports(ROWS, tmp_path, stem="x")
    assert out.csv == tmp_path / "x.csv" and out.markdown == tmp_path / "x.md"
    assert out.csv.read_text() == to_csv(ROWS) and out.markdown.read_text() == to_markdown(ROWS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv", "x.md"]
