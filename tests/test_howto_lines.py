"""The commands ``make deploy-test`` takes from the deployment how-tos (tests/support/containers.py) are on the page
and have an equivalent here, checked in ``make test`` in a second so that an edit of the page that drops or renames
one fails before the 10-minute deploy test would; and the page's secrets script, run as written in a folder of the
test's own, makes every secret compose.yaml reads."""

from __future__ import annotations

import pytest
import yaml

from tests.support import howto
from tests.support.containers import COMPOSE_FILE, Compose, KubePlay, shell

RUNNING = {"podman": "podman", "web": "web-container", "url": "http://192.0.2.1:8000", "compose": "podman-compose"}


@pytest.mark.parametrize("kind", [Compose, KubePlay], ids=lambda kind: kind.name)
def test_every_command_the_deploy_test_runs_is_on_the_page_and_has_an_equivalent(kind, tmp_path, monkeypatch):
    deployment = kind(tmp_path)
    monkeypatch.setattr(deployment, "substitutions", lambda: RUNNING)
    page = deployment.page()
    for start in [*deployment.how_to, *deployment.backup, *deployment.restore]:
        script = deployment.as_run_here(howto.find(page, start))
        assert "my-book" not in script and not script.startswith(("docker", "kubectl")), script


def test_a_command_left_without_an_equivalent_fails_naming_its_line(tmp_path, monkeypatch):
    deployment = KubePlay(tmp_path)
    monkeypatch.setattr(deployment, "substitutions", lambda: RUNNING)
    line = howto.Line("kubectl exec deploy/bookchat-worker -- bookchat worker alive", "page.md:7", fenced=True)
    with pytest.raises(AssertionError, match=r"page\.md:7: kubectl exec deploy/bookchat-worker"):
        deployment.as_run_here(line)


def test_the_compose_how_to_gives_its_podman_invocation_and_proxy_settings(tmp_path):
    deployment = Compose(tmp_path)
    assert "--podman-args='--runtime runc --cgroup-manager=cgroupfs'" in deployment.invocation()
    export = howto.find(deployment.page(), "export BOOKCHAT_ALLOWED_HOSTS=").text
    assert {"BOOKCHAT_HTTPS=true", "BOOKCHAT_PROXY_SSL_HEADER=X-Forwarded-Proto"} <= set(export.split())


def test_the_pages_secrets_script_makes_every_secret_compose_reads(tmp_path):
    (tmp_path / "deploy").mkdir()
    secrets = [line for line in howto.commands(section="compose") if line.fenced and "secrets/" in line.text]
    shell(secrets[0], "\n".join(line.text for line in secrets), tmp_path, {})
    wanted = {declared["file"].rsplit("/", 1)[1]
              for declared in yaml.safe_load(COMPOSE_FILE.read_text())["secrets"].values()}
    made = {path.name for path in (tmp_path / "deploy" / "secrets").iterdir() if path.stat().st_size}
    assert wanted <= made, wanted - made
