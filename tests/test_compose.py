"""docker-compose.yml: PostgreSQL and two instances behind one port. No Docker engine is needed:
the file and its nginx config are read and held against each other and against the service's
settings, and the instances' environment is used for real to start two gunicorns on a
throw-away PostgreSQL."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests
import yaml

from conftest import LiveServer
from oomdoctor import config

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def nginx() -> str:
    return (ROOT / "deploy" / "nginx.conf").read_text(encoding="utf-8")


def instances(compose: dict) -> dict[str, dict]:
    return {name: s for name, s in compose["services"].items() if s.get("build") == "."}


def interpolate(value: str, environ: dict[str, str]) -> str:
    """Compose's ${NAME:-default}."""
    return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: environ.get(m.group(1)) or m.group(2), value)


def test_two_instances_of_the_image_share_the_postgresql_service(compose):
    found = instances(compose)
    assert len(found) == 2
    postgres = compose["services"]["postgres"]
    assert postgres["image"].startswith("postgres:") and postgres["image"].split(":")[1][0].isdigit()
    for service in found.values():
        url = interpolate(service["environment"]["OOMDOCTOR_DATABASE"], {})
        assert config.database(url).kind == "postgresql" and "@postgres:5432/" in url
        assert url.rsplit("/", 1)[1] == postgres["environment"]["POSTGRES_DB"]
        assert url.split("//")[1].split(":")[0] == postgres["environment"]["POSTGRES_USER"]
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert "ports" not in service  # reached only through the balancer
    assert "healthcheck" in postgres


def test_one_port_in_front_of_both(compose, nginx):
    published = {name: s["ports"] for name, s in compose["services"].items() if s.get("ports")}
    assert list(published) == ["balancer"] and published["balancer"] == ["8000:8000"]
    upstream = re.search(r"upstream oomdoctor \{(.*?)\}", nginx, re.S).group(1)
    assert sorted(re.findall(r"server ([\w-]+):8000", upstream)) == sorted(instances(compose))
    assert "listen 8000;" in nginx
    assert any(v.endswith(":/etc/nginx/nginx.conf:ro") and v.startswith("./deploy/nginx.conf")
               for v in compose["services"]["balancer"]["volumes"])


def test_the_balancer_passes_what_the_instances_accept(compose, nginx):
    limit_mib = int(re.search(r"client_max_body_size (\d+)m;", nginx).group(1))
    assert limit_mib * 2**20 >= config.DEFAULTS["MAX_MESSAGE_BYTES"] + 64 * 1024
    timeout = int(re.search(r"proxy_read_timeout (\d+)s;", nginx).group(1))
    assert timeout > 60  # gunicorn.conf.py's worker timeout
    assert "non_idempotent" not in nginx  # a POST that reached an instance is never sent twice
    for service in instances(compose).values():  # the client's address is read behind exactly one proxy
        assert service["environment"]["OOMDOCTOR_TRUSTED_PROXIES"] == "1"
    assert "X-Forwarded-For $remote_addr" in nginx


@pytest.mark.server
def test_the_instances_environment_starts_two_instances_on_one_database(compose, postgres, tmp_path):
    import psycopg

    with psycopg.connect(postgres.url(), autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS oomdoctor")
        conn.execute("CREATE DATABASE oomdoctor")
    servers = []
    try:
        for service in instances(compose).values():
            env = {k: interpolate(str(v), {}) for k, v in service["environment"].items()}
            env["OOMDOCTOR_DATABASE"] = env["OOMDOCTOR_DATABASE"].replace("@postgres:5432/", f"@127.0.0.1:{postgres.port}/")
            server = LiveServer(tmp_path, env=env, database=env["OOMDOCTOR_DATABASE"])
            server.env["OOMDOCTOR_BIND"] = f"127.0.0.1:{server.port}"
            servers.append(server.start())
        a, b = servers
        forwarded = {"X-Forwarded-For": "203.0.113.7"}
        r = requests.post(f"{a.url}/api/v1/consultations", json={"message": "Llama-3-8B LoRA on a 4090"},
                          headers=forwarded, timeout=30)
        assert r.status_code == 201
        record = requests.get(f"{b.url}/api/v1/consultations/{r.json()['id']}", headers=forwarded, timeout=30)
        assert record.status_code == 200 and record.json()["turns"] == 1
    finally:
        for server in servers:
            server.stop()
