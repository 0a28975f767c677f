"""`apextui --nproc N --preset NAME --json` (and `apextui advise --nproc N`): start N ranks on this machine through
torchrun's own API (`torch.distributed.run`), each running the same command without `--nproc`.

Why not only torchrun: torchrun ends with its own traceback and exit status 1 when it is interrupted, whatever its
ranks did; here the launcher exits as a single run does (130 after Ctrl-C, 143 after SIGTERM, a rank's own exit
status when it failed, e.g. 1, or 3 when the preset is unavailable), and rank 0's JSON lines reach stdout as they are.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

from .signals import SIGNAL_EXIT

MAX_NPROC = 1024


def strip_nproc(argv: Sequence[str]) -> list[str]:
    """`argv` without its `--nproc N` / `--nproc=N` (what every rank runs)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--nproc":
            skip = True
            continue
        if arg.startswith("--nproc="):
            continue
        out.append(arg)
    return out


def launch(nproc: int, argv: Sequence[str]) -> int:
    """Run `python -m apextui ARGV` on `nproc` ranks of this machine (standalone rendezvous on a free port); the
    exit status, as described in the module's docstring."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    args = get_args_parser().parse_args(["--standalone", "--nproc-per-node", str(nproc), "--module", "apextui",
                                         *strip_nproc(argv)])
    try:
        run(args)
    except SignalException as exc:
        return SIGNAL_EXIT.get(signal.Signals(exc.sigval), 130)
    except ChildFailedError as exc:
        codes = {rank: f.exitcode for rank, f in exc.failures.items()}
        code = codes.get(0) if codes.get(0) else next((c for c in codes.values() if c), 1)
        if code is None or code < 0:  # killed by a signal: its number, as a shell reports it
            return 128 + (-code if code is not None else 9)
        return code
    finally:
        sys.stdout.flush()
    return 0
