"""`sam build` (no container) produces a layer and handlers that import as Lambda imports them.

Each check runs in a fresh python3.12 started with -I -S -B: no site-packages, no PYTHONPATH, no
editable install of scrape_pipeline; only the built directories on sys.path, plus the few
packages the Lambda python3.12 runtime itself provides (boto3 and its dependencies).

Lambda mounts layers read-only under /opt: the layer ships its byte code (CPython 3.12,
unchecked-hash), or every cold start compiles it from source again.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.runtime_imports import LAYER_ROOT, RUNTIME, runtime_closure
from tests.template.helpers import (
    LAYER_LOCK,
    REGION,
    REPO,
    SAM,
    SAM_VENV_BIN,
    TEMPLATE,
    describe,
    function_environment,
    function_property,
    load_template,
    require_sam_tools,
    requirement_pins,
    resources_of_type,
    run,
    tool_env,
)

LAYER = "SharedLayer"
# The byte-code tag of the Lambda runtime's interpreter (python3.12).
CACHE_TAG = "cpython-312"
LAYER_MODULES = (
    "scrape_pipeline",
    "scrape_pipeline.receiver.signatures",
    "aws_lambda_powertools",
    "httpx",
)
# What the python3.12 Lambda runtime ships besides the standard library.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six")
# The operator tools, the local stack and what only they install (the `cli` and `local` extras).
NOT_IN_LAYER = frozenset(
    {
        "scrape_pipeline_ops",
        "scrape_pipeline_local",
        "bench",
        "tests",
        "rich",
        "fastapi",
        "starlette",
    }
    | {"uvicorn", "moto", "flask", "werkzeug", "samtranslator", "cfnlint"}
)

# Imports modules with sys.path set to argv[1] (JSON list), prints where each came from and
# which source files the import compiled (none had usable byte code beside them).
_IMPORT_SCRIPT = """
import importlib, importlib.machinery, json, sys
paths, modules, attribute = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
compiled = []
to_code = importlib.machinery.SourceFileLoader.source_to_code
def spy(self, data, path, *args, **kwargs):
    compiled.append(path)
    return to_code(self, data, path, *args, **kwargs)
importlib.machinery.SourceFileLoader.source_to_code = spy
sys.path[:0] = paths
report = {}
for name in modules:
    module = importlib.import_module(name)
    report[name] = module.__file__
if attribute:
    report["callable"] = callable(getattr(importlib.import_module(modules[-1]), attribute, None))
for name in ("scrape_pipeline", "aws_lambda_powertools", "httpx"):
    if name in sys.modules:
        report.setdefault(name, sys.modules[name].__file__)
report["compiled"] = compiled
print(json.dumps(report))
"""

FUNCTIONS = sorted(resources_of_type(load_template(), "AWS::Serverless::Function"))


def _python312() -> Path:
    """The base python3.12 (not a venv): what SAM's python3.12 workflow needs on PATH."""
    base = Path(sys.base_prefix) / "bin" / "python3.12"
    if base.is_file():
        return base
    found = shutil.which("python3.12")
    if found is None:
        pytest.fail("python3.12 is not on PATH: `sam build` for runtime python3.12 needs it")
    return Path(found)


def _fresh_import(
    paths: list[Path], modules: list[str], attribute: str = "", env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Import modules in an isolated python3.12 with only `paths` on sys.path."""
    args: list[str | Path] = [_python312(), "-I", "-S", "-B", "-c", _IMPORT_SCRIPT]
    args += [json.dumps([str(p) for p in paths]), json.dumps(modules), attribute]
    result = run(args, cwd=paths[0], env=env, timeout=60)
    assert result.returncode == 0, describe(result)
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _is_under(file: str | None, directory: Path) -> bool:
    return file is not None and Path(file).resolve().is_relative_to(directory.resolve())


def _placeholder(value: Any, template: dict[str, Any]) -> str:
    """An environment value as Lambda would see it: parameter defaults, resource stand-ins."""
    if isinstance(value, dict) and "Ref" in value:
        name = value["Ref"]
        parameter = template.get("Parameters", {}).get(name)
        return str(parameter.get("Default", "")) if parameter else f"placeholder-{name}"
    if isinstance(value, dict):
        return f"placeholder-{next(iter(value))}"
    return str(value).lower() if isinstance(value, bool) else str(value)


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`sam build` of the repository, once per module, into a temporary directory.

    --no-cached overrides samconfig.toml: SAM keeps its build graph next to the build dir and
    its caches under the working directory; a test must not write into the repository. The
    base python3.12's directory comes first on PATH: the case of a system python3.12 (the
    user's own environment, pyenv shims and all, is the fresh clone's test below).
    """
    require_sam_tools()
    work = tmp_path_factory.mktemp("sam-build")
    out = work / "build"
    args: list[str | Path] = [SAM, "build", "--template", TEMPLATE, "--build-dir", out]
    args += ["--base-dir", REPO, "--no-cached", "--parallel"]
    env = tool_env(path_prefix=[SAM_VENV_BIN, _python312().parent])
    result = run(args, cwd=work, env=env, timeout=300)
    assert result.returncode == 0, f"sam build failed:\n{describe(result)}"
    return out


@pytest.fixture(scope="module")
def runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding only what the Lambda runtime provides (linked from this venv)."""
    out = tmp_path_factory.mktemp("lambda-runtime")
    for name in RUNTIME_PROVIDED:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, f"{name} is not installed"
        locations = spec.submodule_search_locations
        source = Path(next(iter(locations))) if locations else Path(spec.origin)
        (out / source.name).symlink_to(source)
    return out


def test_built_layer_imports_package_and_dependencies(build_dir: Path) -> None:
    # GIVEN the built layer's python/ directory, alone on sys.path
    layer_python = build_dir / LAYER / "python"
    # WHEN a fresh python3.12 imports the shared package and its dependencies
    report = _fresh_import([layer_python], list(LAYER_MODULES))
    # THEN each one comes from the layer (its Makefile put layers/shared/ under python/)
    for module in LAYER_MODULES:
        assert _is_under(report[module], layer_python), f"{module} from {report[module]}"
    # AND from the layer's byte code: no module of it was compiled from source
    assert [p for p in report["compiled"] if _is_under(p, layer_python)] == []


def _cached(source: Path) -> Path:
    """Where CPython 3.12 (the runtime's) looks for a source file's byte code."""
    return source.parent / "__pycache__" / f"{source.stem}.{CACHE_TAG}.pyc"


def test_built_layer_ships_byte_code_for_every_runtime_module(build_dir: Path) -> None:
    # GIVEN the runtime package in the built layer
    package = build_dir / LAYER / "python" / RUNTIME
    sources = sorted(package.rglob("*.py"))
    assert sources
    # THEN every module of it has its CPython 3.12 byte code beside it
    missing = [str(p.relative_to(package)) for p in sources if not _cached(p).is_file()]
    assert missing == []


def test_built_layer_byte_code_is_complete_current_and_never_checked(build_dir: Path) -> None:
    # GIVEN every source and every byte-code file in the built layer, dependencies included
    layer_python = build_dir / LAYER / "python"
    sources = set(layer_python.rglob("*.py"))
    compiled = set(layer_python.rglob("*.pyc"))
    # THEN each source has its byte code, and there is no other (stale, or another version's)
    assert compiled == {_cached(p) for p in sources}
    # the interpreter these checks use produces the runtime's magic number and source hash
    assert sys.implementation.cache_tag == CACHE_TAG
    for source in sorted(sources):
        header = _cached(source).read_bytes()[:16]
        # AND each one is CPython 3.12's (magic number), hash-based and unchecked (flags 0b01):
        # Lambda neither stats the source nor tries to rewrite the file on its read-only /opt
        magic, flags, source_hash = header[:4], int.from_bytes(header[4:8], "little"), header[8:]
        assert (magic, flags) == (importlib.util.MAGIC_NUMBER, 0b01), source
        # AND it was compiled from this very source
        assert source_hash == importlib.util.source_hash(source.read_bytes()), source


def test_built_layer_ships_the_pinned_dependency_versions(build_dir: Path) -> None:
    # GIVEN the layer's requirements and the distributions sam build installed
    layer_python = build_dir / LAYER / "python"
    pins = {name: pin.version for name, pin in requirement_pins(LAYER_LOCK.read_text()).items()}
    installed = {p.name.removesuffix(".dist-info") for p in layer_python.glob("*.dist-info")}
    # THEN each locked version is the one in the layer, and the layer holds nothing else
    assert pins
    assert len(installed) == len(pins), sorted(installed)
    for name, version in pins.items():
        assert f"{name.replace('-', '_')}-{version}" in installed, (name, sorted(installed))


def _owned_by_distributions(site: Path) -> set[str]:
    """The top-level names the installed distributions wrote (from each RECORD)."""
    owned = set()
    for record in site.glob("*.dist-info/RECORD"):
        for line in record.read_text().splitlines():
            owned.add(line.split(",")[0].split("/")[0])
    return owned


def test_built_layer_ships_the_runtime_its_dependencies_and_nothing_else(build_dir: Path) -> None:
    # GIVEN the built layer's python/ directory
    layer_python = build_dir / LAYER / "python"
    # WHEN its runtime package and its top-level entries are listed
    package = layer_python / RUNTIME
    shipped = {p.relative_to(package) for p in package.rglob("*.py")}
    top = {p.name for p in layer_python.iterdir()}
    # THEN the package is the modules the handlers import, as in the source
    handlers_need = {p.relative_to(LAYER_ROOT / RUNTIME) for p in runtime_closure().values()}
    assert shipped == handlers_need
    # AND beside it only the requirements' distributions (and the requirements file), and the
    # byte code of single-module distributions such as typing_extensions (checked below)
    owned = _owned_by_distributions(layer_python)
    assert top - owned == {RUNTIME, "requirements.txt", "__pycache__"}
    # AND nothing of the operator tools, the local stack or their extras
    assert sorted(top & NOT_IN_LAYER) == []
    assert not [p for p in layer_python.glob("*.dist-info") if p.name.split("-")[0] in NOT_IN_LAYER]


@pytest.mark.parametrize("function", FUNCTIONS)
def test_built_function_handler_loads(
    build_dir: Path, runtime_dir: Path, function: str, tmp_path: Path
) -> None:
    # GIVEN a built function, the built layer and the runtime's own packages, in Lambda's order
    template = load_template()
    module, _, attribute = function_property(template, function, "Handler").rpartition(".")
    function_dir = build_dir / function
    layer_python = build_dir / LAYER / "python"
    # AND the function's environment from the template (parameters at their defaults)
    env = {
        name: _placeholder(value, template)
        for name, value in function_environment(template, function).items()
    }
    env.update(
        PATH="/usr/bin:/bin",
        HOME=str(tmp_path),
        AWS_REGION=REGION,
        AWS_DEFAULT_REGION=REGION,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_EC2_METADATA_DISABLED="true",
        AWS_LAMBDA_FUNCTION_NAME=function,
    )
    assert env["POWERTOOLS_METRICS_NAMESPACE"]
    # WHEN a fresh python3.12 imports the handler module
    report = _fresh_import([function_dir, layer_python, runtime_dir], [module], attribute, env)
    # THEN the handler is there and callable, with the shared code from the layer
    assert report["callable"] is True
    assert _is_under(report[module], function_dir)
    # (handlers are wiring over scrape_pipeline, so every one imports it)
    assert "scrape_pipeline" in report, "the handler does not import scrape_pipeline"
    for shared in ("scrape_pipeline", "aws_lambda_powertools"):
        if shared in report:
            assert _is_under(report[shared], layer_python), f"{shared} from {report[shared]}"
    # AND the layer's byte code served its imports: nothing of the layer compiled from source
    assert [p for p in report["compiled"] if _is_under(p, layer_python)] == []


def _fresh_clone(destination: Path) -> Path:
    """The repository's tracked files as they are in the work tree: what a clone would hold."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, text=True
    ).stdout.split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():  # a tracked file deleted in the work tree is not in the clone
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def test_readme_sam_build_succeeds_in_a_fresh_clone_with_the_users_environment(
    tmp_path: Path,
) -> None:
    # GIVEN a fresh clone, and the environment of whoever runs the tests (PATH untouched: on a
    # machine with pyenv, python3.12 is its shim, which answers from .python-version)
    require_sam_tools()
    clone = _fresh_clone(tmp_path / "scrape-pipeline")
    # WHEN the README's deploy section's build runs there, as written
    result = run([SAM, "build"], cwd=clone, env=tool_env(), timeout=300)
    # THEN it succeeds, although SAM runs the layer's Makefile in a scratch copy of its folder,
    # beyond the reach of the clone's .python-version
    assert result.returncode == 0, f"sam build failed:\n{describe(result)}"
    built = clone / ".aws-sam" / "build"
    assert sorted(p.name for p in built.iterdir() if p.is_dir()) == sorted([*FUNCTIONS, LAYER])
    # AND SAM's "requirements.txt file not found" is once per function (they have none: the
    # layer carries their dependencies), never the layer's, as docs/deploying.md explains it
    said = (result.stdout + result.stderr).count("requirements.txt file not found")
    assert said == len(FUNCTIONS), describe(result)
    # AND the layer holds the runtime's byte code (made by a CPython 3.12, whichever one)
    package = built / LAYER / "python" / RUNTIME
    assert _cached(package / "__init__.py").is_file()
