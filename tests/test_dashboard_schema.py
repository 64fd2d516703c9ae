"""schemathesis against the OpenAPI schema the dashboard serves: whatever it generates
(bounded: a few examples per operation and mode in make test, more in make test-slow), no
request gets a server error."""
from __future__ import annotations

import os
import subprocess

import pytest

from helpers import CLI, make_repo
from test_dashboard_support import served

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402  (after the skip)
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402


@pytest.fixture(scope="module")
def dashboard_server(tmp_path_factory):
    """One dashboard for the module, over a repository with a session and a lock.  It
    outlives each test, so it gets its own sealed environment (like hermetic_seal's)."""
    home = tmp_path_factory.mktemp("schema-home")
    (home / ".gitconfig").write_text("[user]\n\tname = Test\n\temail = t@example.com\n"
                                     "[init]\n\tdefaultBranch = main\n")
    with pytest.MonkeyPatch.context() as env:
        for name in list(os.environ):
            if name.startswith(("GIT_", "AGENT_REGISTRY_")):
                env.delenv(name)
        env.setenv("HOME", str(home))
        env.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
        env.setenv("GIT_CONFIG_NOSYSTEM", "1")
        repo = make_repo(tmp_path_factory.mktemp("schema") / "repo")
        sleeper = subprocess.Popen(["sleep", "600"])
        try:
            for args in (["register", "kimi-1", "--provider", "Kimi", "--pid", str(sleeper.pid)],
                         ["lock", "acquire", "src/auth.py", "--session", "kimi-1"],
                         ["context", "log", "kimi-1", "a diary line"]):
                subprocess.run([CLI, *args], cwd=repo, check=True, capture_output=True)
            with served(repo) as info:
                yield info
        finally:
            sleeper.kill()
            sleeper.wait()


@pytest.mark.parametrize("examples", [4, pytest.param(12, marks=pytest.mark.slow)])
def test_no_request_gets_a_server_error(dashboard_server, examples):
    # hypothesis strategies per operation (schemathesis' lazy pytest loader needs an older
    # pytest), for valid and for invalid input
    schema = schemathesis.openapi.from_url(dashboard_server["url"] + "api/openapi.json")
    schema = schema.exclude(path="/api/events")  # an endless stream: see the browser tests
    base_url = dashboard_server["url"].rstrip("/")
    headers = {"X-Agent-Registry-Token": dashboard_server["token"]}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/api/sessions", "/api/locks/force-release",
                                              "/api/wiki/{entry_id}"}
    tried_invalid_input_on = {operation.label for operation in operations}
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            @given(case=operation.as_strategy(mode))
            @settings(max_examples=examples, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            def no_server_error(case):
                case.call_and_validate(base_url=base_url, headers=headers,
                                       checks=[not_a_server_error], timeout=30)
            try:
                no_server_error()
            except Unsatisfiable:
                # no invalid input exists (no parameters, or any string is a valid id)
                assert mode is GenerationMode.NEGATIVE, operation.label
                tried_invalid_input_on.discard(operation.label)
    assert tried_invalid_input_on, "invalid input was generated for no operation"
