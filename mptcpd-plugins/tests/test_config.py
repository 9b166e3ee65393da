"""Configuration validation: the C plugin and the Python helper agree.

Every bad file is fed to both readers; both must refuse it with a
message naming the same section and field.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gwsteer.config import ConfigError, load_config, load_config_text, read_defaults

HERE = Path(__file__).resolve().parent
C_CHECK = HERE.parent / "test_gwsteer"

GOOD = """
[gwsteer]
probe_target = 10.99.0.1
[gateway gw1]
source = 10.1.1.2
hops = 10.1.1.1
[gateway gw2]
source = 10.1.0.3
hops = fc00:e::1, fc00:2::d4
backup = yes
"""

GW = "[gateway gw1]\nsource = 10.1.1.2\nhops = 10.1.1.1\n"

BAD = [
    ("[gateway gw1]\nsource = 10.1.1.300\nhops = 10.1.1.1\n",
     "[gateway gw1] source: '10.1.1.300' is not an IP address"),
    (GW + "[gateway gw1]\nsource = 10.1.2.2\nhops = 10.1.2.1\n",
     "[gateway gw1]: duplicate gateway id"),
    ("[gwsteer]\nprobe_intervl_ms = 5\n" + GW,
     "[gwsteer] probe_intervl_ms: unknown key"),
    ("[gwsteer]\nprobe_interval_ms = fast\n" + GW,
     "[gwsteer] probe_interval_ms: 'fast' is not a valid non-negative integer"),
    ("[gwsteer]\newma_alpha = 1.5\n" + GW, "[gwsteer] ewma_alpha: must be in [0, 1)"),
    ("[gwsteer]\nrole = server\n" + GW, "[gwsteer] role: 'server' is not client or proxy"),
    ("[gateway gw1]\nsource = 10.1.1.2\nhops = 10.1.1.1, 10.0.0.9\n",
     "[gateway gw1] hops: '10.1.1.1' is not an IPv6 SRv6 segment"),
    ("[gateway gw1]\nsource = 10.1.1.2\n", "[gateway gw1] hops: missing"),
    ("[gateway gw1]\nhops = 10.1.1.1\n", "[gateway gw1] source: missing"),
    (GW + "[gateway gw2]\nsource = 10.1.1.2\nhops = 10.1.1.1\n",
     "[gateway gw2] source: 10.1.1.2 is already the source of gateway gw1"),
    ("[gateway gw1]\nsource = 10.1.1.2\nhops = 10.1.1.1\nbackup = maybe\n",
     "[gateway gw1] backup: 'maybe' is not a boolean"),
    ("[gateway gw1]\nsource = 10.1.1.2\nhops = 10.1.1.1\nweight = 3\n",
     "[gateway gw1] weight: unknown key"),
    ("[gateways]\n", "[gateways]: unknown section"),
    ("[gwsteer]\nrole = client\n", "role client needs at least one [gateway <id>] section"),
    ("[gateway gw1]\nsource = 10.1.1.2\nhops = fc00::1\n",
     "[gateway gw1] probe: missing or not of the family of source"),
]


def test_defaults_come_from_the_c_header() -> None:
    defaults = read_defaults()
    assert defaults["probe_interval_ms"].default == "200"
    assert defaults["status_file"].default == "/run/braid/gateways.json"
    cfg = load_config_text(GOOD)
    for name, key in defaults.items():
        if key.type == "uint":
            assert cfg.settings[name] == int(key.default)


def test_good_config() -> None:
    cfg = load_config_text(GOOD)
    assert [g.id for g in cfg.gateways] == ["gw1", "gw2"]
    assert cfg.gateways[0].steering == "onlink"
    assert cfg.gateways[1].steering == "srv6" and cfg.gateways[1].backup
    assert str(cfg.gateways[1].probe) == "10.99.0.1"
    with pytest.raises(ConfigError, match="unknown gateway 'gw9' \\(known: gw1, gw2\\)"):
        cfg.gateway("gw9")


@pytest.mark.parametrize("text,message", BAD)
def test_bad_config_python(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config_text(text, "x.conf")
    assert message in str(err.value)


@pytest.mark.parametrize("text,message", BAD)
def test_bad_config_c_plugin(text: str, message: str, tmp_path: Path) -> None:
    if not C_CHECK.exists():
        pytest.skip("build test_gwsteer first (make)")
    path = tmp_path / "x.conf"
    path.write_text(text)
    p = subprocess.run([str(C_CHECK), "check", str(path)], capture_output=True, text=True,
                       check=False)
    assert p.returncode == 2
    assert message in p.stderr, p.stderr


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="cannot read the configuration file"):
        load_config("/nonexistent/gateways.conf")


def test_readme_defaults_table_is_current() -> None:
    from gwsteer.config import defaults_table
    readme = (HERE.parent / "README.md").read_text()
    assert defaults_table() in readme, "regenerate: python3 -m gwsteer.config"
