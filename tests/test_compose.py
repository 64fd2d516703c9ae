"""The compose sandbox (issue 14): compose.yaml and the Dockerfile, read with a YAML parser
and, where docker compose is installed, resolved by `docker compose config` (the image
itself is not built here: that needs a docker daemon and the network)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from helpers import ROOT

SERVICES = {"sync", "dashboard", "watch", "agent"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def command_line(service: dict) -> str:
    command = service["command"]
    return command if isinstance(command, str) else " ".join(command)


def binds(service: dict) -> dict[str, dict]:
    return {v["target"]: v for v in service["volumes"]}


def test_the_four_services_run_the_one_image(compose):
    assert set(compose["services"]) == SERVICES
    for service in compose["services"].values():
        assert service["build"] == "." and service["image"] == "agent-registry:local"
        assert service["working_dir"] == "/repo"


def test_what_each_service_runs(compose):
    services = compose["services"]
    assert re.search(r"while :; do agent-registry sync\b.*; done", command_line(services["sync"]))
    dashboard = services["dashboard"]
    assert dashboard["command"] == ["agent-registry", "dashboard", "--host", "0.0.0.0",
                                    "--port", "8765"]
    assert any(p.endswith(":8765:8765") for p in dashboard["ports"])
    # the token comes from the environment (or .env), never written in the file
    assert dashboard["environment"]["AGENT_REGISTRY_DASHBOARD_TOKEN"] == \
        "${AGENT_REGISTRY_DASHBOARD_TOKEN:-}"
    assert services["watch"]["command"][:2] == ["agent-registry", "watch"]
    assert services["watch"]["environment"]["AGENT_REGISTRY_NOTIFY_URLS"].startswith("${")
    assert services["agent"]["command"] == ["bash"]
    assert services["agent"]["stdin_open"] and services["agent"]["tty"]


def test_the_repository_is_bind_mounted_and_the_credentials_read_only(compose):
    for name, service in compose["services"].items():
        mounts = binds(service)
        assert mounts["/repo"]["type"] == "bind" and not mounts["/repo"].get("read_only"), name
        for target in ("/home/agent/.ssh", "/home/agent/.gitconfig"):
            assert mounts[target]["type"] == "bind" and mounts[target]["read_only"] is True
            assert mounts[target]["source"].startswith("${HOME}/")


def test_no_secret_is_written_in_the_files(compose):
    for service in compose["services"].values():
        for key, value in service["environment"].items():
            assert key == "HOME" or str(value).startswith("${"), key


def test_the_dockerfile_uses_debian_and_pypi_packages_only():
    text = (ROOT / "Dockerfile").read_text()
    froms = re.findall(r"^FROM\s+(\S+)", text, flags=re.M)
    assert froms and all(f.startswith("debian:") for f in froms)
    install = re.search(r"apt-get install[^&]*", text).group()
    for package in ("git", "openssh-client", "python3", "python3-venv"):
        assert re.search(rf"\s{re.escape(package)}(\s|$)", install), package
    assert not re.search(r"\b(curl|wget)\b|^ADD\s+https?:", text, flags=re.M)
    extras = re.search(r"pip install [^\n]*\[([\w,]+)\]", text).group(1).split(",")
    pyproject = (ROOT / "pyproject.toml").read_text()
    for extra in extras:
        assert re.search(rf"^{extra} = \[", pyproject, flags=re.M), extra
    assert {"web", "notify"} <= set(extras)
    for source in re.findall(r"^COPY\s+(.+?)\s+\S+$", text, flags=re.M):
        for path in source.split():
            assert (ROOT / path).exists(), path


def compose_command() -> list[str] | None:
    """`docker compose` (v2), else `docker-compose` (v1), when one answers."""
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) and subprocess.run(
                [*command, "version"], capture_output=True).returncode == 0:
            return command
    return None


def test_docker_compose_config_resolves_the_file(tmp_path, repo):
    command = compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed here")
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir(exist_ok=True)
    env = {**os.environ, "AGENT_REGISTRY_REPO": str(repo), "UID": "1234", "GID": "1234",
           "AGENT_REGISTRY_DASHBOARD_TOKEN": "t0ken", "AGENT_REGISTRY_NOTIFY_URLS": "json://x/y"}
    proc = subprocess.run([*command, "-f", str(ROOT / "compose.yaml"), "config"], env=env,
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    resolved = yaml.safe_load(proc.stdout)["services"]
    assert set(resolved) == SERVICES
    assert resolved["dashboard"]["environment"]["AGENT_REGISTRY_DASHBOARD_TOKEN"] == "t0ken"
    assert resolved["watch"]["environment"]["AGENT_REGISTRY_NOTIFY_URLS"] == "json://x/y"
    for service in resolved.values():
        mounts = binds(service)
        assert mounts["/repo"]["source"] == str(repo)
        assert mounts["/home/agent/.gitconfig"]["source"] == str(home / ".gitconfig")
        assert str(service["user"]) == "1234:1234"
    # left for the shell, not interpolated by compose (printed escaped again as $$)
    assert re.search(r"sleep \$\$?\{SYNC_INTERVAL:-60\}", command_line(resolved["sync"]))
