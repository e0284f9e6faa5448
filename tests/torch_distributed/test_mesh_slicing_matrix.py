"""The DeviceMesh slicing table in sub-skills/torch-distributed/references/dtensor.md is the rendering of the
committed capture, and the generator rerun live (a child process, fake process group, world size 8) gives the
same capture. Set-7 miss s7-td-01."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402
import _mesh_slicing_matrix as gen  # noqa: E402

CAPTURE = gb.load_json(gen.CAPTURE)


def test_page_block_is_the_rendered_capture():
    gb.assert_page_is_rendered(gen.PAGE, gen.render(CAPTURE))


def test_live_rerun_matches_the_capture_and_the_claims():
    # a child process: the fake default group must not meet a group another test of this worker holds
    proc = subprocess.run([sys.executable, gen.__file__, "probe"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    live = json.loads(proc.stdout.strip().splitlines()[-1])
    assert live == CAPTURE
    assert live["torch"].startswith("2.13.0") and [r["expr"] for r in live["rows"]] == gen.CASES
    rows = {i: r for i, r in enumerate(live["rows"], 1)}
    warn = "UserWarning: Slicing a flattened dim from root mesh will be deprecated"
    # the three lines work on 2.13.0, the flattened slice warns, _concatenate gives the same mesh
    assert rows[13]["result"] == rows[24]["result"] == "2-D mesh (dp_cp=4, ep=2), ranks [[0, 1], [2, 3], [4, 5], [6, 7]]"
    assert rows[13]["warnings"][0].startswith(warn) and rows[24]["warnings"] == []
    assert rows[11]["warnings"] == []
    # order: reversed names, and a non-adjacent flattened dim with a dim inside it
    for i in (5, 14, 23):
        assert rows[i]["result"].startswith("KeyError") and "Mesh dim indices should be in ascending order." in rows[i]["result"]
    assert rows[4]["result"].startswith("2-D mesh (dp=2, ep=2)") and rows[21]["result"].startswith("2-D mesh (dp=2, cp_ep=4)")
    assert rows[15]["result"].startswith("RuntimeError: Slicing overlapping dim_names")
    assert rows[18]["result"].startswith("ValueError: Flatten mesh with mesh_dim_name dp_cp has been created before")
    assert rows[17]["result"].startswith("1-D mesh (dp_cp=4)")
    assert rows[31]["result"] == "RuntimeError: Cannot slice a DeviceMesh without mesh_dim_names!"
    assert rows[27]["result"].startswith("RuntimeError") and rows[29]["result"].startswith("RuntimeError")
    assert rows[28]["result"] == "8"
