"""config.py: every RUST_KERNELS_* variable read and validated in one place; `arch` validated before any work; the
CLI reports errors in one line (issue 9, items 7 and 10)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rust_kernels
from rust_kernels import builder, cli, config, toolchain
from rust_kernels.errors import ArgumentError, ArgumentTypeError, CacheError, ConfigError, ToolchainMissing
from rust_kernels.kernels import BatchNorm2dNchwBackward

PACKAGE = Path(config.__file__).parent


@pytest.fixture
def no_cached_toolchain():
    toolchain.find_toolchain.cache_clear()
    yield
    toolchain.find_toolchain.cache_clear()


def _script(path: Path, body: str = "exit 1", mode: int = 0o755) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(mode)
    return path


def _unwritable_dir(tmp_path: Path) -> Path:
    if os.geteuid() == 0:  # root writes through permission bits; sysfs refuses new files even to root
        assert Path("/sys").is_dir()
        return Path("/sys")
    directory = tmp_path / "read-only"
    directory.mkdir(mode=0o555)
    return directory


# --- one module reads the environment -------------------------------------------------------------------------------


def test_only_config_reads_rust_kernels_variables():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in ("config.py", "ptx_linker.py"):  # ptx_linker runs in rustc's process (documented)
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"(environ|getenv)\b.*RUST_KERNELS_", line):
                offenders.append(f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}")
    assert offenders == []


def test_every_variable_named_in_the_package_is_a_config_variable_in_its_table():
    named = set()
    for path in PACKAGE.rglob("*.py"):
        named |= set(re.findall(r"RUST_KERNELS_[A-Z_]*[A-Z]", path.read_text()))
    assert named <= set(config.VARIABLES)
    for name in config.VARIABLES:
        assert f"| `{name}` |" in config.__doc__


def test_a_change_of_the_environment_takes_effect_at_the_next_call(monkeypatch):
    monkeypatch.setenv("RUST_KERNELS_ARCH", "sm_80")
    assert config.settings().arch == "sm_80"
    monkeypatch.setenv("RUST_KERNELS_ARCH", "sm_100a")
    assert config.settings().arch == "sm_100a"
    assert builder.default_arch() == "sm_100a"
    monkeypatch.delenv("RUST_KERNELS_ARCH")
    assert config.settings().arch == "sm_90"


# --- RUST_KERNELS_CACHE_DIR -----------------------------------------------------------------------------------------


def test_cache_dir_under_a_regular_file_is_a_config_error(monkeypatch, tmp_path):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("RUST_KERNELS_CACHE_DIR", str(tmp_path / "file" / "cache"))
    with pytest.raises(ConfigError, match=r"^RUST_KERNELS_CACHE_DIR=.*cannot create .*writable directory"):
        config.settings()
    # the build reports it, not an OSError from deep inside
    with pytest.raises(ConfigError, match="RUST_KERNELS_CACHE_DIR"):
        rust_kernels.build(BatchNorm2dNchwBackward(block_hw=256))


def test_cache_dir_that_is_a_regular_file_is_a_config_error(monkeypatch, tmp_path):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("RUST_KERNELS_CACHE_DIR", str(tmp_path / "file"))
    with pytest.raises(ConfigError, match=r"^RUST_KERNELS_CACHE_DIR=.*exists and is not a directory"):
        config.settings()


def test_cache_dir_that_cannot_be_written_is_a_config_error(monkeypatch, tmp_path):
    monkeypatch.setenv("RUST_KERNELS_CACHE_DIR", str(_unwritable_dir(tmp_path)))
    with pytest.raises(ConfigError, match=r"^RUST_KERNELS_CACHE_DIR=.*cannot write in"):
        config.settings()


def test_cache_dir_is_created(monkeypatch, tmp_path):
    monkeypatch.setenv("RUST_KERNELS_CACHE_DIR", str(tmp_path / "a" / "b"))
    assert config.settings().cache_dir == tmp_path / "a" / "b"
    assert (tmp_path / "a" / "b").is_dir()


# --- RUST_KERNELS_RUSTC, _CARGO, _PTXAS, _LLVM_BIN -----------------------------------------------------------------

TOOLS = ["RUST_KERNELS_RUSTC", "RUST_KERNELS_CARGO", "RUST_KERNELS_PTXAS"]


@pytest.mark.parametrize("name", TOOLS)
def test_tool_that_does_not_exist_is_a_config_error(name, monkeypatch, tmp_path):
    monkeypatch.setenv(name, str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=rf"^{name}=.*: no such file; point {name} at a"):
        config.settings()


@pytest.mark.parametrize("name", TOOLS)
def test_tool_that_is_not_executable_is_a_config_error(name, monkeypatch, tmp_path):
    monkeypatch.setenv(name, str(_script(tmp_path / "tool", mode=0o644)))
    with pytest.raises(ConfigError, match=rf"^{name}=.*: not an executable file"):
        config.settings()
    monkeypatch.setenv(name, str(tmp_path))  # a directory
    with pytest.raises(ConfigError, match=rf"^{name}=.*: not an executable file"):
        config.settings()


@pytest.mark.parametrize("name", TOOLS)
def test_tool_given_as_a_command_name_is_looked_up_on_path(name, monkeypatch, tmp_path):
    tool = _script(tmp_path / "my-tool")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(name, "my-tool")
    attribute = name.removeprefix("RUST_KERNELS_").lower()
    assert getattr(config.settings(), attribute) == tool
    monkeypatch.setenv(name, "no-such-tool")
    with pytest.raises(ConfigError, match=rf"^{name}='no-such-tool': not found on PATH"):
        config.settings()


def test_llvm_bin_must_hold_the_llvm_tools(monkeypatch, tmp_path):
    monkeypatch.setenv("RUST_KERNELS_LLVM_BIN", str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=r"^RUST_KERNELS_LLVM_BIN=.*: not a directory"):
        config.settings()
    _script(tmp_path / "opt")
    monkeypatch.setenv("RUST_KERNELS_LLVM_BIN", str(tmp_path))
    with pytest.raises(ConfigError, match=r"^RUST_KERNELS_LLVM_BIN=.*: lacks llvm-link, llc;"):
        config.settings()
    _script(tmp_path / "llvm-link")
    _script(tmp_path / "llc")
    assert config.settings().llvm_bin == tmp_path


def test_a_missing_configured_rustc_does_not_fall_back(monkeypatch, no_cached_toolchain):
    monkeypatch.setenv("RUST_KERNELS_RUSTC", "/nonexistent/rustc")
    with pytest.raises(ConfigError, match=r"^RUST_KERNELS_RUSTC='/nonexistent/rustc': no such file"):
        toolchain.find_toolchain()


def test_an_unusable_configured_rustc_does_not_fall_back(monkeypatch, tmp_path, no_cached_toolchain):
    monkeypatch.setenv("RUST_KERNELS_RUSTC", str(_script(tmp_path / "rustc")))
    with pytest.raises(ToolchainMissing, match=r"^RUST_KERNELS_RUSTC=.*rustc' cannot build nvptx64-nvidia-cuda PTX"):
        toolchain.find_toolchain()


def test_a_configured_cargo_that_is_missing_is_named(monkeypatch, no_cached_toolchain):
    monkeypatch.setenv("RUST_KERNELS_CARGO", "/nonexistent/cargo")
    with pytest.raises(ConfigError, match=r"^RUST_KERNELS_CARGO="):
        toolchain.find_toolchain()


def test_a_configured_ptxas_is_used_alone(monkeypatch, tmp_path):
    monkeypatch.setenv("RUST_KERNELS_PTXAS", str(tmp_path / "ptxas"))
    with pytest.raises(ConfigError, match=r"^RUST_KERNELS_PTXAS="):
        toolchain.find_ptxas()
    monkeypatch.setenv("RUST_KERNELS_PTXAS", str(_script(tmp_path / "ptxas")))
    assert toolchain.find_ptxas() == tmp_path / "ptxas"


# --- RUST_KERNELS_ARCH, RUST_KERNELS_QUIET and the arch argument ---------------------------------------------------

GOOD_ARCHS = ["sm_70", "sm_80", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_120a"]
BAD_ARCHS = ["sm_90/../../..", "../../tmp", "sm90", "sm_9", "sm_1000", "sm_90b", "sm_90\n", " sm_90", "compute_90"]
BAD_ARCHS += ["SM_90", "sm_\u0669\u0660", ""]  # Arabic-Indic digits match \d; an empty arch is not "the default"


@pytest.mark.parametrize("arch", GOOD_ARCHS)
def test_good_archs_are_accepted(arch, monkeypatch):
    assert config.resolve_arch(arch) == arch
    monkeypatch.setenv("RUST_KERNELS_ARCH", arch)
    assert config.resolve_arch() == arch


@pytest.mark.parametrize("arch", [a for a in BAD_ARCHS if a])
def test_bad_arch_variable_is_a_config_error(arch, monkeypatch):
    monkeypatch.setenv("RUST_KERNELS_ARCH", arch)
    with pytest.raises(ConfigError, match=r"^RUST_KERNELS_ARCH=.*expected sm_NN or sm_NNa"):
        config.settings()


@pytest.mark.parametrize(("name", "field", "default"), [("RUST_KERNELS_QUIET", "quiet", False),
                                                     ("RUST_KERNELS_PERSISTENT", "persistent", True),
                                                     ("RUST_KERNELS_BLOCK", "block", True)])  # fmt: skip
def test_switches_take_0_or_1_and_default_when_unset(monkeypatch, name, field, default):
    monkeypatch.delenv(name, raising=False)
    assert getattr(config.settings(), field) is default
    monkeypatch.setenv(name, "1")
    assert getattr(config.settings(), field) is True
    monkeypatch.setenv(name, "0")
    assert getattr(config.settings(), field) is False
    monkeypatch.setenv(name, "yes")
    with pytest.raises(ConfigError, match=rf"^{name}='yes': expected 1 \("):
        config.settings()


@pytest.mark.parametrize("arch", BAD_ARCHS)
def test_bad_arch_is_refused_by_every_entry_before_any_work(arch, monkeypatch, tmp_path, no_cached_toolchain):
    monkeypatch.setenv("RUST_KERNELS_CACHE_DIR", str(tmp_path / "cache"))

    def no_work(*args, **kwargs):
        raise AssertionError("work started for a bad arch")

    monkeypatch.setattr(builder, "find_toolchain", no_work)
    monkeypatch.setattr(builder, "_built_entry", no_work)
    k = BatchNorm2dNchwBackward(block_hw=256)
    calls = [
        lambda: rust_kernels.build(k, arch),
        lambda: rust_kernels.build(k, arch=arch),
        lambda: rust_kernels.compile(k, arch=arch),
        lambda: builder.content_hash(k, arch),
        lambda: builder.source_key(k, arch),
        lambda: builder.cached_entry(k, arch),
    ]
    for call in calls:
        with pytest.raises(ArgumentError, match=r"^arch: expected sm_NN or sm_NNa .*, got "):
            call()
    assert [p for p in tmp_path.rglob("*") if p != tmp_path / "cache"] == []


def test_arch_of_the_wrong_type_is_refused():
    with pytest.raises(ArgumentTypeError, match=r"^arch: expected a string"):
        rust_kernels.build(BatchNorm2dNchwBackward(block_hw=256), arch=90)


@pytest.mark.parametrize("command", ["build", "run"])
def test_cli_refuses_a_bad_arch_before_any_work(command, monkeypatch, capsys):
    def no_work():
        raise AssertionError("work started for a bad arch")

    monkeypatch.setattr(toolchain, "find_toolchain", no_work)
    with pytest.raises(SystemExit) as info:
        cli.main([command, "--arch", "sm_90/../../.."])
    assert info.value.code == 2
    assert "argument --arch: expected sm_NN or sm_NNa" in capsys.readouterr().err


# --- the CLI: one line, exit status 2 ------------------------------------------------------------------------------


def _cli(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RUST_KERNELS_")}
    environment |= {"PYTHONPATH": str(PACKAGE.parent), "RUST_KERNELS_QUIET": "1", **env}
    return subprocess.run(
        [sys.executable, "-m", "rust_kernels", "build"], capture_output=True, text=True, env=environment, cwd=tmp_path
    )


def test_cli_bad_cache_dir_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "file").write_text("x")
    done = _cli(tmp_path, RUST_KERNELS_CACHE_DIR=str(tmp_path / "file" / "cache"))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("error: RUST_KERNELS_CACHE_DIR=") and done.stderr.count("\n") == 1


def test_cli_bad_cargo_is_one_line_and_exit_2(tmp_path):
    done = _cli(tmp_path, RUST_KERNELS_CACHE_DIR=str(tmp_path / "cache"), RUST_KERNELS_CARGO="/nonexistent/cargo")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "error: RUST_KERNELS_CARGO='/nonexistent/cargo': no such file; point RUST_KERNELS_CARGO at a cargo "
        "executable or unset it\n"
    )


def test_cli_cache_error_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys, no_cached_toolchain):
    """No toolchain here and nothing in the cache: a CacheError, reported without a traceback."""
    monkeypatch.setenv("RUST_KERNELS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RUST_KERNELS_RUSTC", str(_script(tmp_path / "rustc")))
    monkeypatch.setenv("RUST_KERNELS_QUIET", "1")
    assert cli.main(["build"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "has no valid entry in the cache" in err
    with pytest.raises(CacheError):  # what main caught
        builder.cached_entry(BatchNorm2dNchwBackward(block_hw=256))
