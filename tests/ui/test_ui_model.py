"""`apextui --model M` in the TUI: the model is a workload group in the picker (its variants, unavailable ones
with the reason), its runs train in the real worker process and land in the comparison table, and a model
whose function raises fails its run while the app keeps running."""

from __future__ import annotations

import pytest
from ui_fakes import cpu_probe_no_apex, no_gpu_report, provider, wait_for

from apextui.core.model_presets import presets_for
from apextui.core.presets import load_builtin
from apextui.ui.app import default_runner_factory, make_app
from apextui.ui.widgets.preset_picker import GROUP_PREFIX, PresetPicker
from helpers import ROOT

pytestmark = pytest.mark.asyncio

GPT = str(ROOT / "examples" / "gpt.py") + ":build"


async def test_model_variants_in_the_picker_run_in_the_worker_and_land_in_the_table(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the worker's tiny steps on a small shared CPU
    bad = tmp_path / "bad.py"
    bad.write_text("def build():\n    raise ValueError('no such checkpoint')\n")
    presets = [*load_builtin(), *presets_for(GPT), *presets_for(f"{bad}:build", names=("fp32",))]
    app = make_app(presets=presets, report_provider=provider(no_gpu_report()), probe=cpu_probe_no_apex(),
                   runner_factory=default_runner_factory, device="cpu", steps=4, autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.probe is not None, what="probe")
        picker = app.query_one(PresetPicker)
        heads = [str(o.prompt) for o in picker.options if o.id and o.id.startswith(GROUP_PREFIX)]
        assert "model  vs fp32" in heads  # two models: the group keeps the workload's name
        names = [o.id for o in picker.options]
        assert names.index("gpt:build/fp32") < names.index("gpt:build/compile_cg")
        assert not picker.is_available("gpt:build/fused_adam") and picker.is_available("gpt:build/bf16")
        fused = next(o for o in picker.options if o.id == "gpt:build/fused_norms")
        assert "needs NVIDIA Apex" in str(fused.prompt)

        assert app.start_preset("gpt:build/fp32")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 1 and app.active is None, 120, "the fp32 run")
        assert app.start_preset("gpt:build/adamw_fused")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 2 and app.active is None, 120, "adamw_fused")
        fp32, fused_adamw = app.table.rows_data
        assert (fp32.status, fused_adamw.status) == ("ok", "ok")
        assert fused_adamw.model == GPT and fused_adamw.check.passed and fused_adamw.check.against == "fp32"

        assert app.start_preset("bad:build/fp32")
        await wait_for(pilot, lambda: len(app.table.rows_data) == 3 and app.active is None, 120, "the bad model")
        failed = app.table.rows_data[2]
        assert failed.status == "failed" and "raised ValueError: no such checkpoint" in failed.error
        assert app.is_running


async def test_model_opens_with_the_cursor_on_the_models_group_and_starts_nothing():
    presets = [*load_builtin(), *presets_for(GPT)]
    app = make_app(presets=presets, report_provider=provider(no_gpu_report()), probe=cpu_probe_no_apex(),
                   device="cpu", highlight="gpt:build/fp32")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.probe is not None, what="probe")
        picker = app.query_one(PresetPicker)
        assert picker.highlighted_preset is not None and picker.highlighted_preset.name == "gpt:build/fp32"
        ids = [o.id for o in picker.options]
        assert ids[picker.highlighted - 1] == GROUP_PREFIX + "model"  # the first line under the model's group
        assert app.active is None and not app.table.rows_data
