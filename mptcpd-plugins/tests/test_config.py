"""Configuration validation: one validator, the plugin's C loader.

The Python tools read the configuration through ``gwsteer-check`` (the
plugin's loader as a command), so every bad file is refused by both with
the loader's message; these tests feed bad files to ``gwsteer-check``
directly and through the Python API, and fail (never skip) when the
validator is missing.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from gwsteer.config import ConfigError, check_command, load_config, load_config_text, read_defaults

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

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
    ("[gwsteer]\nrole = client\n" + GW + "[gwsteer]\nprefer_best = true\n",
     "[gwsteer]: duplicate section"),
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
     "[gateway gw1] probe: missing or not of the gateway's family, ipv4"),
    # Gateways named by their interface (DHCP, RA, hotplug): the name
    # need not exist yet, but must be one the kernel would accept.
    ("[gateway gw1]\ninterface = averyverylongname0\n",
     "[gateway gw1] interface: 'averyverylongname0' is not a valid interface name"),
    ("[gateway gw1]\ninterface = wan/0\n",
     "[gateway gw1] interface: 'wan/0' is not a valid interface name"),
    ("[gateway gw1]\ninterface = eth0:1\n",
     "[gateway gw1] interface: 'eth0:1' is not a valid interface name"),
    ("[gateway gw1]\ninterface = ..\n",
     "[gateway gw1] interface: '..' is not a valid interface name"),
    # Quotes and backslashes: the kernel takes them, the status file's JSON would not.
    ('[gateway gw1]\ninterface = e"1\n',
     """[gateway gw1] interface: 'e"1' is not a valid interface name"""),
    ("[gateway gw1]\ninterface = e\\1\n",
     "[gateway gw1] interface: 'e\\1' is not a valid interface name"),
    ("[gwsteer]\nstatus_file = /run/braid/\n" + GW,
     "[gwsteer] status_file: '/run/braid/' is not an absolute path to a file"),
    ("[gateway gw1]\nsource = 10.1.1.2\ninterface = wan0\nfamily = ipv6\nhops = 10.1.1.1\n",
     "[gateway gw1] family: ipv6 does not agree with source 10.1.1.2 (an ipv4 address)"),
    ("[gateway gw1]\ninterface = wan0\nfamily = ip4\n",
     "[gateway gw1] family: 'ip4' is neither ipv4 nor ipv6"),
    ("[gwsteer]\nprobe_target =\n[gateway gw1]\ninterface = wan0\n",
     "[gateway gw1] family: missing (a gateway named by its interface alone"),
    ("[gwsteer]\nprobe_target = 10.99.0.1\n[gateway gw1]\ninterface = wan0\nhops =\n",
     "[gateway gw1] hops: empty (leave the key out to take the next hop from wan0's default route)"),
    ("[gateway gw1]\ninterface = wan0\nfamily = ipv6\n",
     "[gateway gw1] probe: missing or not of the gateway's family, ipv6"),
    ("[gwsteer]\nprobe_target = 10.99.0.1\n[gateway a]\ninterface = wan0\n[gateway b]\ninterface = wan0\n",
     "[gateway b] interface: wan0 (ipv4) is already followed by gateway a"),
    # Where the two parsers used to disagree:
    ("[gwsteer]\nfail_after = 2\nfail_after = 5\n" + GW, "[gwsteer] fail_after: set twice (line 3)"),
    ("[gwsteer]\nfail_after = 2\n  5\n" + GW, "line 3: continuation lines are not supported"),
    ("[gwsteer]\nfail_after = +5\n" + GW, "[gwsteer] fail_after: '+5' is not a valid non-negative integer"),
    ("[gwsteer]\newma_alpha = 0x1p-1\n" + GW, "[gwsteer] ewma_alpha: '0x1p-1' is not a valid number"),
    ("[gwsteer]\nswitch_margin = nan\n" + GW, "[gwsteer] switch_margin: 'nan' is not a valid number"),
    ("[gwsteer]\nfail_after = \u0663\n" + GW, "[gwsteer] fail_after: '\u0663' is not a valid non-negative integer"),
    ("[gwsteer]\nhold_ms = 1 000\n" + GW, "[gwsteer] hold_ms: '1 000' is not a valid non-negative integer"),
    # Rounds would be dropped silently: 16 x 200 ms is the limit.
    ("[gwsteer]\nprobe_timeout_ms = 3200\n" + GW,
     "[gwsteer] probe_timeout_ms: must be less than 16 x probe_interval_ms (3200)"),
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


def test_interface_gateways() -> None:
    """``interface =`` instead of (or as well as) ``source``; ``hops`` from the route."""
    cfg = load_config_text(
        "[gwsteer]\nprobe_target = 10.99.0.1\n"
        "[gateway isp]\ninterface = wan0\n"
        "[gateway lte]\ninterface = wwan0\nfamily = ipv6\nprobe = fc00:99::1\nbackup = yes\n"
        "[gateway fixed]\nsource = 10.1.1.2\ninterface = eth1\nhops = 10.1.1.1\n"
        "[gateway lte4]\ninterface = wwan0\n")
    isp, lte, fixed, lte4 = cfg.gateways
    assert (isp.source, isp.interface, isp.version, isp.hops) == (None, "wan0", 4, ())
    assert isp.steering == "onlink" and isp.dynamic
    assert (lte.interface, lte.version, str(lte.probe)) == ("wwan0", 6, "fc00:99::1")
    assert str(fixed.source) == "10.1.1.2" and fixed.interface == "eth1" and not fixed.dynamic
    # One interface, two families: two gateways (an LTE modem's IPv4 and IPv6).
    assert (lte4.interface, lte4.version) == ("wwan0", 4)


@pytest.mark.parametrize("text,message", BAD)
def test_bad_config_python(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config_text(text, "x.conf")
    assert message in str(err.value)


@pytest.mark.parametrize("text,message", BAD)
def test_bad_config_c_loader(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "x.conf"
    path.write_text(text)
    p = subprocess.run([check_command(), str(path)], capture_output=True, text=True, check=False)
    assert p.returncode == 2
    assert message in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_validator_is_built() -> None:
    """The validator exists: a missing one must fail the suite, not skip it."""
    p = subprocess.run([check_command(), "--help"], capture_output=True, text=True, check=False)
    assert p.returncode == 0 and "gwsteer-check" in p.stdout


def test_validator_says_its_version() -> None:
    """--version names braid's release, as every braid command does."""
    release = re.search(r'^version = "(.*)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert release is not None
    p = subprocess.run([check_command(), "--version"], capture_output=True, text=True, check=False)
    assert p.returncode == 0
    assert p.stdout.startswith(f"gwsteer-check {release.group(1)}"), p.stdout


def test_odd_input_is_a_clean_error(tmp_path: Path) -> None:
    """No input makes the tools crash: a ConfigError or a valid config."""
    odd = ["\ufeff[gwsteer]\n" + GW, "[gwsteer]\nprobe_target\n" + GW, "[gwsteer\n",
           "[gateway gw1]\nsource = 10.1.1.2\nhops = 10.1.1.1,\n", "= 5\n" + GW, "%(x)s\n"]
    for text in odd:
        try:
            load_config_text(text, "x.conf")
        except ConfigError as e:
            assert str(e).startswith("x.conf"), str(e)


def test_boundary_values_accepted() -> None:
    cfg = load_config_text("[gwsteer]\nprobe_timeout_ms = 3199\newma_alpha = .5\n" + GW)
    assert cfg.settings["probe_timeout_ms"] == 3199 and cfg.settings["ewma_alpha"] == 0.5


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="cannot read the configuration file"):
        load_config("/nonexistent/gateways.conf")


def test_readme_defaults_table_is_current() -> None:
    from gwsteer.config import defaults_table
    readme = (HERE.parent / "README.md").read_text()
    assert defaults_table() in readme, "regenerate: python3 -m gwsteer.config"


@pytest.mark.parametrize("unsafe", ["symlink", "world-writable"])
def test_status_directory_the_plugin_would_not_write_is_refused(unsafe: str, tmp_path: Path) -> None:
    """The plugin writes no status file through a symbolic link or into a
    directory group or others can write (mptcpd would then run without
    one): gwsteer-check says so before it starts."""
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    status_dir = tmp_path / "status"
    if unsafe == "symlink":
        status_dir.symlink_to(real)
        message = "is a symbolic link"
    else:
        status_dir.mkdir()
        status_dir.chmod(0o777)
        message = "writable by group or others (mode 777)"
    path = tmp_path / "x.conf"
    path.write_text(f"[gwsteer]\nstatus_file = {status_dir}/gateways.json\n" + GW)
    p = subprocess.run([check_command(), str(path)], capture_output=True, text=True, check=False)
    assert p.returncode == 2 and message in p.stderr, p.stderr
    path.write_text(f"[gwsteer]\nstatus_file = {real}/gateways.json\n" + GW)
    p = subprocess.run([check_command(), str(path)], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
