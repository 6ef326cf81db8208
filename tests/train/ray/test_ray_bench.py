"""esopt bench ray runs on the tiny model and reports its RESULT lines (no timing is asserted)."""
import json

import pytest

from esopt.cli import main
from esopt.train.ray.cluster import local_cores

from conftest import TINY_OVERRIDES

pytestmark = pytest.mark.ray


@pytest.mark.skipif(local_cores() < 2, reason="compares 2 workers x 1 thread with 1 process x 2 threads")
def test_bench_ray_reports(ray_local, tmp_path, capsys):
    out = tmp_path / "ray.json"
    assert main(["bench", "ray", "configs/demo.yaml", *TINY_OVERRIDES, "es.noise=gaussian", "--repeats", "1",
                 "--out", str(out)]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("RESULT ")]
    names = [ln.split("=")[0][len("RESULT "):] for ln in lines]
    assert names == ["ray_over_local_generation_time", "ray_member_overhead_s", "worker_over_local_peak_rss",
                     "ray_payload_bytes_per_generation"]
    data = json.loads(out.read_text())
    assert set(data["setups"]) == {"local", "ray_1x", "ray_nx1"} and len(data["setups"]["ray_nx1"]["workers"]) == 2
    assert data["results"]["ray_payload_bytes_per_generation"] > 0
    assert ray_local.is_initialized()  # the bench left the test's Ray instance alone
