"""Build braid's kernel: Debian's linux-source-6.12 + kernel/patches + config.

The build is the kernel's own ``bindeb-pkg``: it yields the bzImage the VM
boots and Debian packages of that same image (``linux-image-*.deb``, plus
``linux-headers-*.deb`` for a configuration with modules), versioned
``<kernel>-braid<braid version>+<build hash>``.

The build is cached under ``$BRAID_CACHE`` (default ``~/.cache/braid``) keyed by
a hash of everything that changes the result: the source package version, the
patch series, the config fragments and this file's build recipe. A second build
with the same inputs is a no-op. The source tree is a git repository so that
switching patch series only touches the files the patches change, and the
out-of-tree object directory is reused: rebuilding after a patch edit only
recompiles what the patch touched.

Usage::

    from kbuild import ensure_kernel
    image = ensure_kernel()        # builds if needed, returns the cached image
    print(image.bzimage, image.marker)
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent
PATCH_DIR = KERNEL_DIR / "patches"
SERIES_FILE = PATCH_DIR / "series"
BRAID_FRAGMENT = KERNEL_DIR / "config" / "braid.config"
DISTRO_FRAGMENT = KERNEL_DIR / "config" / "distro.config"
# Debian's kernel configurations (linux-config-6.12) braid builds a box's
# kernel from: cloud-amd64 for a VPS, amd64 for hardware.
DISTRO_FLAVOURS = ("cloud-amd64", "amd64")
VIRTME_EXCLUDE = KERNEL_DIR / "config" / "virtme-exclude.txt"
KERNEL_ENV = KERNEL_DIR / "kernel.env"
# Bump when the recipe below changes in a way that changes the image.
RECIPE_VERSION = "3"
LOCALVERSION = "-braid"

# Host tools the build needs, and the Debian package that provides each.
REQUIRED_TOOLS = {
    "make": "make",
    "dpkg-buildpackage": "dpkg-dev",
    "dh_listpackages": "debhelper",
    "fakeroot": "fakeroot",
    "gcc": "gcc",
    "flex": "flex",
    "bison": "bison",
    "bc": "bc",
    "xz": "xz-utils",
    "git": "git",
    "virtme-configkernel": "virtme-ng (pip install -r requirements.txt)",
}
REQUIRED_HEADERS = {
    "/usr/include/libelf.h": "libelf-dev",
    "/usr/include/openssl/ssl.h": "libssl-dev",
}


class BuildError(RuntimeError):
    """A kernel build step failed; the message says which and why."""


@dataclasses.dataclass(frozen=True)
class KernelImage:
    """A built kernel in the cache."""

    bzimage: Path
    config: Path
    build_hash: str

    @property
    def marker(self) -> str:
        """String that appears in the booted kernel's /proc/version."""
        return marker_for(self.build_hash)

    @property
    def debs(self) -> list[Path]:
        """The Debian packages of this image (``linux-image-*``, and
        ``linux-headers-*`` when the configuration has modules)."""
        return sorted((self.bzimage.parent / "debs").glob("*.deb"))


def marker_for(build_hash: str) -> str:
    return f"braid-{build_hash[:16]}"


def braid_version() -> str:
    """braid's release, from pyproject.toml."""
    text = (KERNEL_DIR.parent / "pyproject.toml").read_text()
    m = re.search(r'^version = "([^"]+)"', text, re.M)
    if not m:
        raise BuildError("pyproject.toml has no version line")
    return m.group(1)


def package_version(kernel_version: str, build_hash: str) -> str:
    """The Debian version of the kernel packages: the kernel's, then braid's
    release and the build hash, e.g. ``6.12.118-braid0.1.0+b292cba3834b``."""
    upstream = kernel_version.split("-", 1)[0]
    return f"{upstream}-braid{braid_version()}+{build_hash[:12]}"


def cache_dir() -> Path:
    return Path(os.environ.get("BRAID_CACHE", Path.home() / ".cache" / "braid"))


def read_kernel_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for line in KERNEL_ENV.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    return env


def log(msg: str) -> None:
    print(f"kernel: {msg}", file=sys.stderr, flush=True)


def check_dependencies() -> None:
    """Fail with the package to install when a build dependency is missing."""
    missing = [pkg for tool, pkg in REQUIRED_TOOLS.items() if not shutil.which(tool)]
    missing += [pkg for hdr, pkg in REQUIRED_HEADERS.items() if not Path(hdr).exists()]
    env = read_kernel_env()
    if not Path(env["LINUX_SOURCE_TARBALL"]).exists():
        missing.append(env["LINUX_SOURCE_PACKAGE"])
    if missing:
        raise BuildError(
            "missing build dependencies; install: "
            + " ".join(sorted(set(missing)))
            + " (scripts/install-deps installs all of them)"
        )


def installed_source_version(package: str) -> str:
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", package],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def read_series() -> list[Path]:
    """The patch series in order; every listed patch must exist."""
    if not SERIES_FILE.exists():
        return []
    patches = []
    for n, line in enumerate(SERIES_FILE.read_text().splitlines(), 1):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        path = PATCH_DIR / name
        if not path.is_file():
            raise BuildError(f"{SERIES_FILE}:{n}: patch {name!r} is listed but missing")
        patches.append(path)
    return patches


def virtme_options(source: Path) -> list[str]:
    """The config lines virtme-ng needs, minus those a headless VM can skip."""
    out = subprocess.run(
        ["virtme-configkernel", "--dry-run"],
        cwd=source,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    excluded = {
        line.strip()
        for line in VIRTME_EXCLUDE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    keep = []
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith("CONFIG_"):
            continue
        if line.split("=", 1)[0] not in excluded:
            keep.append(line)
    return keep


def build_hash(version: str, patches: list[Path], virtme: list[str]) -> str:
    h = hashlib.sha256()
    h.update(f"recipe {RECIPE_VERSION}\nsource {version}\nbraid {braid_version()}\n".encode())
    for patch in patches:
        h.update(f"patch {patch.name}\n".encode())
        h.update(patch.read_bytes())
    h.update(BRAID_FRAGMENT.read_bytes())
    h.update("\n".join(virtme).encode())
    return h.hexdigest()


@contextmanager
def exclusive(lock_path: Path, waiting: str) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path``, logging ``waiting`` if it is busy."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(waiting)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def run(cmd: list[str], cwd: Path, what: str) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BuildError(f"{what} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return proc.stdout


def prepare_source(root: Path, version: str, tarball: Path) -> Path:
    """A git tree of the pristine source, unpacked once per source version."""
    src = root / "src"
    stamp = src / ".braid-source-version"
    if stamp.exists() and stamp.read_text() == version:
        return src
    log(f"unpacking {tarball.name} ({version}); once per source version")
    shutil.rmtree(src, ignore_errors=True)
    tmp = root / "src.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    run(["tar", "-xf", str(tarball), "-C", str(tmp), "--strip-components=1"], tmp, "unpack")
    git = ["git", "-c", "user.name=braid", "-c", "user.email=braid@localhost"]
    run(["git", "init", "-q"], tmp, "git init")
    # Debian's tarball ships a .gitignore that ignores everything: force.
    run(["git", "add", "-A", "-f"], tmp, "git add")
    run([*git, "commit", "-q", "-m", f"pristine {version}"], tmp, "git commit")
    run(["git", "tag", "pristine"], tmp, "git tag")
    # Detached: a checked-out branch marks a tree someone works in, which
    # apply_series refuses to reset.
    run(["git", "checkout", "-q", "--detach", "pristine"], tmp, "git checkout")
    (tmp / ".git" / "info" / "exclude").write_text(".braid-source-version\n")
    tmp.rename(src)
    stamp.write_text(version)
    return src


def apply_series(src: Path, patches: list[Path]) -> None:
    """Reset the tree to pristine and apply the series, naming a broken patch.

    The reset throws away whatever the tree holds, so a tree someone works
    in (a branch checked out, as a patch is changed) is refused, not reset:
    development belongs in a worktree of its own (kernel/README.md)."""
    branch = subprocess.run(["git", "symbolic-ref", "-q", "--short", "HEAD"], cwd=src,
                            capture_output=True, text=True, check=False).stdout.strip()
    if branch:
        raise BuildError(
            f"{src} has branch {branch} checked out, and the build resets this tree: "
            f"work in a worktree (git -C {src} worktree add ../dev {branch}) and run "
            f"'git -C {src} checkout -q --detach pristine'")
    run(["git", "checkout", "-q", "-f", "pristine"], src, "reset source tree")
    run(["git", "clean", "-q", "-f", "-d", "-x", "-e", ".braid-source-version"], src, "clean")
    for patch in patches:
        proc = subprocess.run(
            ["git", "apply", "--index", str(patch)],
            cwd=src,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise BuildError(
                f"patch {patch.parent.name}/{patch.name} does not apply:\n{proc.stderr.strip()}"
            )
    if patches:
        log(f"applied {len(patches)} patch(es): " + ", ".join(p.name for p in patches))


def configure(src: Path, obj: Path, virtme: list[str], marker: str) -> None:
    log("configuring: tinyconfig, virtme-ng's and braid's fragments")
    obj.mkdir(parents=True, exist_ok=True)
    virtme_frag = obj / "virtme.config"
    virtme_frag.write_text("\n".join(virtme) + "\n")
    marker_frag = obj / "marker.config"
    marker_frag.write_text(f'CONFIG_LOCALVERSION="{LOCALVERSION}"\nCONFIG_LOCALVERSION_AUTO=n\n')
    make = ["make", "-s", f"O={obj}", "ARCH=x86_64"]
    run([*make, "tinyconfig"], src, "make tinyconfig")
    run(
        [
            "scripts/kconfig/merge_config.sh",
            "-m",
            "-O",
            str(obj),
            str(obj / ".config"),
            str(virtme_frag),
            str(BRAID_FRAGMENT),
            str(marker_frag),
        ],
        src,
        "merge config fragments",
    )
    run([*make, "olddefconfig"], src, "make olddefconfig")
    verify_config(obj / ".config", [BRAID_FRAGMENT])


def distro_config(flavour: str) -> Path:
    """Debian's configuration of ``flavour`` (linux-config-6.12, xz)."""
    env = read_kernel_env()
    path = Path(env["LINUX_CONFIG_DIR"]) / f"config.amd64_none_{flavour}.xz"
    if not path.exists():
        raise BuildError(f"{path} is missing: install {env['LINUX_CONFIG_PACKAGE']} (scripts/install-deps)")
    return path


def configure_distro(src: Path, obj: Path, flavour: str) -> None:
    """Debian's configuration of ``flavour`` plus braid's distro fragment:
    a kernel that boots what Debian's boots, with braid's schedulers."""
    log(f"configuring: Debian's {flavour} configuration and braid's distro fragment")
    obj.mkdir(parents=True, exist_ok=True)
    (obj / ".config").write_bytes(lzma.decompress(distro_config(flavour).read_bytes()))
    marker_frag = obj / "marker.config"
    marker_frag.write_text(f'CONFIG_LOCALVERSION="{LOCALVERSION}-{flavour}"\nCONFIG_LOCALVERSION_AUTO=n\n')
    run(["scripts/kconfig/merge_config.sh", "-m", "-O", str(obj), str(obj / ".config"), str(DISTRO_FRAGMENT),
         str(marker_frag)], src, "merge config fragments")
    run(["make", "-s", f"O={obj}", "ARCH=x86_64", "olddefconfig"], src, "make olddefconfig")
    verify_config(obj / ".config", [DISTRO_FRAGMENT])


def verify_config(config: Path, fragments: list[Path]) -> None:
    """Every option a fragment sets must survive olddefconfig."""
    final: dict[str, str] = {}
    for line in config.read_text().splitlines():
        if m := re.match(r"(CONFIG_\w+)=(.*)", line):
            final[m[1]] = m[2]
        elif m := re.match(r"# (CONFIG_\w+) is not set", line):
            final[m[1]] = "n"
    dropped = []
    for frag in fragments:
        for line in frag.read_text().splitlines():
            if m := re.match(r"(CONFIG_\w+)=(.*)", line.strip()):
                if final.get(m[1], "n") != m[2]:
                    dropped.append(f"{m[1]}={m[2]} (got {final.get(m[1], 'unset')})")
    if dropped:
        raise BuildError(
            "config options were dropped by Kconfig (unmet dependencies?):\n  "
            + "\n  ".join(dropped)
        )


# Seconds between compile status lines.
REPORT_EVERY_S = 15.0


def compile_status(compiled: int, estimate: int, elapsed: float) -> str:
    """``compiling: 1200/2400 files ~50%, 300s elapsed, ETA ~300s``: the
    files compiled so far against the last build's count (the estimate;
    0 on a first build, when only the count and time are known)."""
    text = f"compiling: {compiled}"
    if estimate:
        pct = min(99, 100 * compiled // estimate)
        text += f"/{estimate} files ~{pct}%, {int(elapsed)}s elapsed"
        if compiled:
            text += f", ETA ~{int(elapsed / compiled * max(0, estimate - compiled))}s"
        return text
    return text + f" files, {int(elapsed)}s elapsed"


def build_stage(line: str) -> str | None:
    """The stage a line of make's output starts, after compiling: linking
    vmlinux, or building one Debian package; else None."""
    words = line.split()
    if words[:2] == ["LD", "vmlinux"]:
        return "linking vmlinux"
    if line.startswith("dpkg-deb: building package"):
        return "packaging " + words[3].strip("'") if len(words) > 3 else "packaging"
    return None


def compile_kernel(src: Path, obj: Path, marker: str, jobs: int, pkgversion: str) -> None:
    """make bindeb-pkg (the kernel and its packages), printing progress
    while the ~10-minute build runs. The packages land in obj's parent."""
    cmd = [
        "make",
        f"O={obj}",
        "ARCH=x86_64",
        f"-j{jobs}",
        f"KBUILD_BUILD_HOST={marker}",
        # An empty LOCALVERSION stops setlocalversion from appending "+"
        # for our git-managed source tree: uname -r ends in "-braid".
        "LOCALVERSION=",
        "KBUILD_BUILD_USER=braid",
        f"KDEB_PKGVERSION={pkgversion}",
        "bindeb-pkg",
    ]
    estimate_file = obj / ".braid-object-count"
    estimate = int(estimate_file.read_text()) if estimate_file.exists() else 0
    log(f"compiling with {jobs} jobs" + (f" (~{estimate} files, as last time)" if estimate else ""))
    start = time.monotonic()
    last_report = start
    compiled = 0
    tail: list[str] = []
    # make's own output (thousands of CC lines) is kept, not printed: a CI
    # log keeps its tail and that would be all of it. What is printed is a
    # status line every REPORT_EVERY_S (files done of the last build's
    # count, elapsed, ETA) and a line per stage after compiling (linking,
    # each package), so a slow phase shows which it is; the last 60 lines
    # of make's output come with a failure.
    proc = subprocess.Popen(
        cmd, cwd=src, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        tail = [*tail[-59:], line]
        if line.startswith("  CC "):
            compiled += 1
        now = time.monotonic()
        if stage := build_stage(line):
            log(f"{stage} ({int(now - start)}s elapsed)")
        elif now - last_report >= REPORT_EVERY_S:
            last_report = now
            log(compile_status(compiled, estimate, now - start))
    if proc.wait() != 0:
        raise BuildError("kernel compile failed:\n" + "".join(tail))
    if compiled > 200:
        estimate_file.write_text(str(compiled))
    log(f"compiled {compiled} files in {int(time.monotonic() - start)}s")


def ensure_kernel(jobs: int | None = None, force: bool = False, flavour: str | None = None,
                  config_only: bool = False) -> KernelImage:
    """Return the cached kernel for the current inputs, building it if needed.

    ``flavour`` None is the VM's small kernel (tinyconfig, virtme-ng's and
    braid's fragments); one of DISTRO_FLAVOURS is a box's kernel from
    Debian's configuration of that name (cached apart: its own object tree
    and images). ``config_only`` stops after the configuration, checked,
    and returns the image it would build (``config`` then names the
    object tree's .config)."""
    check_dependencies()
    if flavour is not None and flavour not in DISTRO_FLAVOURS:
        raise BuildError(f"unknown flavour {flavour!r}: one of {', '.join(DISTRO_FLAVOURS)}")
    env = read_kernel_env()
    package = env["LINUX_SOURCE_PACKAGE"]
    version = installed_source_version(package)
    if version != env["LINUX_SOURCE_VERSION"]:
        log(
            f"warning: {package} {version} is installed but braid is tested with "
            f"{env['LINUX_SOURCE_VERSION']}; building anyway"
        )
    root = cache_dir() / "kernel"
    patches = read_series()
    # Only one kernel build at a time: two on 2 cores starve each other.
    with exclusive(root / "build.lock", "another kernel build is running; waiting for it"):
        src = prepare_source(root, version, Path(env["LINUX_SOURCE_TARBALL"]))
        if flavour is None:
            virtme = virtme_options(src)
            digest = build_hash(version, patches, virtme)
            out, obj = root / "images" / digest[:16], current_object_tree()
        else:
            distro = [f"flavour {flavour}", DISTRO_FRAGMENT.read_text(), distro_config(flavour).read_bytes().hex()]
            digest = build_hash(version, patches, distro)
            out, obj = root / f"images-{flavour}" / digest[:16], root / f"obj-{flavour}"
        image = KernelImage(out / "bzImage", out / "config", digest)
        if image.bzimage.exists() and not force and not config_only:
            return image
        log(f"{'configuring' if config_only else 'building'} kernel {image.marker} ({len(patches)} patches)")
        try:
            apply_series(src, patches)
        except BuildError as err:
            if version == env["LINUX_SOURCE_VERSION"]:
                raise
            raise BuildError(
                f"{err}\nThe series is kept against {package} {env['LINUX_SOURCE_VERSION']} and "
                f"{version} is installed: install that version (scripts/install-deps does, while "
                "the archive has it) or rebase the series on this one (kernel/README.md)") from err
        if flavour is None:
            configure(src, obj, virtme, image.marker)
        else:
            configure_distro(src, obj, flavour)
        if config_only:
            log(f"configuration checked: {obj / '.config'}")
            return KernelImage(image.bzimage, obj / ".config", digest)
        pkgversion = package_version(version, digest)
        for stale in root.glob("*.deb"):
            stale.unlink()
        compile_kernel(src, obj, image.marker, jobs or os.cpu_count() or 1, pkgversion)
        tmp = out.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / "debs").mkdir(parents=True)
        shutil.copy2(obj / "arch" / "x86" / "boot" / "bzImage", tmp / "bzImage")
        shutil.copy2(obj / ".config", tmp / "config")
        collect_debs(root, tmp / "debs", pkgversion, tmp / "bzImage")
        manifest = {"hash": digest, "source": version, "package_version": pkgversion,
                    "patches": [p.name for p in patches]}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        log(f"kernel ready: {image.bzimage}")
        return image


def collect_debs(built: Path, dest: Path, pkgversion: str, bzimage: Path) -> None:
    """Move the kernel's packages from ``built`` to ``dest`` and check that
    the image package holds exactly ``bzimage``: the VM boots the bytes a
    box installs. linux-libc-dev is dropped (a box keeps its
    distribution's), with the build's .buildinfo and .changes."""
    for deb in built.glob(f"*_{pkgversion}_*.deb"):
        if deb.name.startswith(("linux-image-", "linux-headers-")):
            deb.rename(dest / deb.name)
        else:
            deb.unlink()
    for extra in [*built.glob(f"*_{pkgversion}_*.buildinfo"), *built.glob(f"*_{pkgversion}_*.changes")]:
        extra.unlink()
    images = list(dest.glob("linux-image-*.deb"))
    if len(images) != 1:
        raise BuildError(f"bindeb-pkg made {len(images)} linux-image packages in {built}, want 1")
    release = images[0].name.removeprefix("linux-image-").split("_", 1)[0]
    packaged = deb_member(images[0], f"./boot/vmlinuz-{release}")
    if packaged != bzimage.read_bytes():
        raise BuildError(f"{images[0].name}: /boot/vmlinuz-{release} differs from the built bzImage")


def deb_member(deb: Path, member: str) -> bytes:
    """One file's bytes from a Debian package's data."""
    with tempfile.TemporaryDirectory() as tmp:
        run(["dpkg-deb", "-x", str(deb), tmp], Path(tmp), f"dpkg-deb -x {deb.name}")
        path = Path(tmp) / member
        if not path.is_file():
            raise BuildError(f"{deb.name} has no {member.lstrip('.')}")
        return path.read_bytes()


def current_source_tree() -> Path:
    """The patched source tree of the last build (for checkpatch and reading)."""
    return cache_dir() / "kernel" / "src"


def current_object_tree() -> Path:
    """The VM kernel's object tree (its .config) of the last build."""
    return cache_dir() / "kernel" / "obj"
