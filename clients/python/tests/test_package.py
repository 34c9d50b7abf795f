"""The package as users install it: `python -m build` writes an sdist and
builds the wheel from that sdist (so the sdist must carry everything,
protos included); each is installed with pip into a fresh virtual
environment, offline from the wheelhouse scripts/test.sh keeps under
.tools/, and used there against a real server."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from harness import REPO

SMOKE = textwrap.dedent(
    """
    import sys
    from tidemark import Client, offset

    with Client(sys.argv[1]) as client:
        lease = client.acquire_lease("pkg.events", sys.argv[2], holder="installed").lease
        response = client.commit_batch(lease, 0, offset(3, 0, False, 1))
        assert response.next_snapshot == 4, response
        assert client.describe_consumer("pkg.events", sys.argv[2]).info.consumer.next_snapshot == 4
        client.release_lease(lease)
    import tidemark.paimon_plan, tidemark.sinks  # the Spark pieces and the sinks import without pyspark or drivers
    print("installed tidemark works")
    """
)


def wheelhouse() -> str:
    house = os.environ.get("TIDEMARK_WHEELHOUSE") or str(REPO / ".tools" / "wheelhouse")
    assert os.path.isdir(house), f"no wheelhouse at {house}: run scripts/test.sh (it downloads one)"
    return house


def offline(house: str) -> dict:
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_FIND_LINKS=house, PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("TIDEMARK_PROTO_ROOT", None)
    return env


def run(args, **kwargs) -> str:
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_sdist_and_the_wheel_install_into_fresh_environments_and_work(tmp_path, tidemark_server, unique):
    house = wheelhouse()
    env = offline(house)
    dist = tmp_path / "dist"
    # Default `build`: the sdist first, then the wheel built from it.
    run([sys.executable, "-m", "build", "--outdir", str(dist), str(REPO / "clients" / "python")], env=env)
    sdists = list(dist.glob("tidemark-*.tar.gz"))
    wheels = list(dist.glob("tidemark-*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, list(dist.iterdir())
    for artifact in (wheels[0], sdists[0]):
        venv = tmp_path / f"venv-{artifact.suffix.strip('.')}"
        run([sys.executable, "-m", "venv", str(venv)])
        python = venv / "bin" / "python"
        run([str(python), "-m", "pip", "install", "--quiet", str(artifact)], env=env, cwd=tmp_path)
        out = run([str(python), "-c", SMOKE, tidemark_server.endpoint, unique("pkg")], cwd=tmp_path)
        assert "installed tidemark works" in out
