"""The testbed cache: damaged artefacts are detected and rebuilt, crashed builds cleaned, files shareable."""

import os
import stat
import time
from dataclasses import asdict

import pytest

from icml26.testbeds import cache
from icml26.testbeds.cache import CacheError, cached_dir, clean_stale_builds, load_cached


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML26_CACHE", str(tmp_path / "cache"))
    cache._verified.clear()
    yield tmp_path / "cache"
    cache._verified.clear()


def counting_build(counter, payload=b"x" * 1000):
    def build(d):
        counter.append(1)
        (d / "model.bin").write_bytes(payload)
    return build


def test_builds_once_and_writes_manifest_last():
    calls = []
    d = cached_dir("toy", {"a": 1}, counting_build(calls))
    assert (d / cache.MANIFEST).exists() and (d / cache.COMPLETE).exists()
    assert cached_dir("toy", {"a": 1}, counting_build(calls)) == d
    assert len(calls) == 1


def test_truncated_file_is_detected_and_rebuilt(caplog):
    calls = []
    d = cached_dir("toy", {"a": 2}, counting_build(calls))
    with open(d / "model.bin", "r+b") as f:
        f.truncate(10)
    cache._verified.clear()
    assert not cache.is_cached("toy", {"a": 2})
    d2 = cached_dir("toy", {"a": 2}, counting_build(calls))
    assert cache.is_cached("toy", {"a": 2})
    assert d2 == d and len(calls) == 2
    assert (d / "model.bin").stat().st_size == 1000
    assert any("damaged" in m and str(d) in m for m in caplog.messages)


def test_same_size_corruption_is_caught_by_the_hash():
    calls = []
    d = cached_dir("toy", {"a": 3}, counting_build(calls))
    (d / "model.bin").write_bytes(b"y" * 1000)
    cache._verified.clear()  # a new process checks hashes
    cached_dir("toy", {"a": 3}, counting_build(calls))
    assert len(calls) == 2 and (d / "model.bin").read_bytes() == b"x" * 1000


def test_truncated_safetensors_rebuilds_through_the_loader_path():
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file, save_file

    calls = []

    def build(d):
        calls.append(1)
        save_file({"w": torch.arange(1000, dtype=torch.float32)}, d / "model.safetensors")

    def load(d):
        return load_file(d / "model.safetensors")["w"].clone()  # not a view of the mapped file

    w = load_cached("toy_st", {"b": 1}, build, load)
    d = cached_dir("toy_st", {"b": 1}, build)
    # damage the file AND its manifest (as a folder from before manifests would be): only the loader notices
    with open(d / "model.safetensors", "r+b") as f:
        f.truncate(100)
    (d / cache.MANIFEST).unlink()
    cache._verified.clear()
    w2 = load_cached("toy_st", {"b": 1}, build, load)
    assert len(calls) == 2 and torch.equal(w, w2)


def test_loader_that_always_fails_names_the_folder():
    def load(d):
        raise OSError("unreadable")

    with pytest.raises(CacheError, match="delete that folder") as e:
        load_cached("toy_bad", {"c": 1}, counting_build([]), load)
    assert "toy_bad" in str(e.value)


def test_stale_build_folders_are_cleaned(isolated_cache):
    kind = isolated_cache / "toy"
    kind.mkdir(parents=True)
    old = kind / ".deadbeef00000000.tmpabc"
    fresh = kind / ".cafebabe00000000.tmpdef"
    for p in (old, fresh):
        p.mkdir()
        (p / "half.bin").write_bytes(b"1")
    past = time.time() - 2 * cache.STALE_TMP_S
    os.utime(old, (past, past))
    removed = clean_stale_builds(kind)
    assert removed == [old] and not old.exists() and fresh.exists()  # a young one may be a running build
    # a build of any artefact also clears its own leftovers, whatever their age
    own = kind / f".{cache.config_hash({'d': 1})}.tmpxyz"
    own.mkdir()
    cached_dir("toy", {"d": 1}, counting_build([]))
    assert not own.exists()


def test_stale_folder_with_a_held_lock_is_kept(isolated_cache):
    kind = isolated_cache / "toy"
    kind.mkdir(parents=True)
    p = kind / ".0123456789abcdef.tmpq"
    p.mkdir()
    past = time.time() - 2 * cache.STALE_TMP_S
    os.utime(p, (past, past))
    with cache.file_lock(kind / ".0123456789abcdef.lock"):
        # flock is per open file description: a second open in this process does not get it either
        assert clean_stale_builds(kind) == []
    assert p.exists()


def test_cache_files_and_folders_are_world_readable():
    old = os.umask(0o022)
    try:
        from icml26.harness import store

        store._umask.cache_clear()
        d = cached_dir("toy", {"e": 1}, counting_build([]))
        assert stat.S_IMODE(d.stat().st_mode) == 0o755
        for p in d.iterdir():
            assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
    finally:
        os.umask(old)
        store._umask.cache_clear()


def test_damaged_folder_that_cannot_be_removed_is_named(monkeypatch):
    d = cached_dir("toy", {"f": 1}, counting_build([]))
    with open(d / "model.bin", "r+b") as f:
        f.truncate(3)
    cache._verified.clear()

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cache.os, "replace", refuse)
    with pytest.raises(CacheError, match="delete that folder") as e:
        cached_dir("toy", {"f": 1}, counting_build([]))
    assert str(d) in str(e.value) and "model.bin" in str(e.value)


def test_a_testbed_model_whose_weights_were_truncated_is_rebuilt_on_load():
    """The real loader path of a testbed (tiny 4-step masked diffusion LM): cut its weights file in half, load
    again, and get a working model back instead of a traceback."""
    import torch

    from icml26.testbeds.cache import cache_root, config_hash
    from icml26.testbeds.diffusion_lm.model import DLMTrainConfig, load_masked_diffusion_lm

    cfg = DLMTrainConfig(task="t1c", steps=4, pool_size=128, batch_size=8)
    first = load_masked_diffusion_lm(cfg)
    weights = cache_root() / "masked_diffusion_lm" / config_hash(asdict(cfg)) / "model.pt"
    size = weights.stat().st_size
    weights.write_bytes(weights.read_bytes()[: size // 2])
    again = load_masked_diffusion_lm(cfg)
    assert weights.stat().st_size == size
    for a, b in zip(first.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)  # the rebuild is deterministic: same config, same weights


def test_artefact_without_manifest_is_never_adopted():
    """A deleted manifest next to a truncated file looked complete and was adopted (issue: a cache that cannot be
    fooled); it must be rebuilt instead, and is_cached must not report it."""
    calls = []
    d = cached_dir("toy", {"no-manifest": 1}, counting_build(calls))
    (d / cache.MANIFEST).unlink()
    with open(d / "model.bin", "r+b") as f:
        f.truncate(10)
    cache._verified.clear()
    assert not cache.is_cached("toy", {"no-manifest": 1})
    d2 = cached_dir("toy", {"no-manifest": 1}, counting_build(calls))
    assert len(calls) == 2 and (d2 / "model.bin").stat().st_size == 1000 and (d2 / cache.MANIFEST).exists()


def test_files_a_library_writes_0600_become_shareable():
    old = os.umask(0o022)
    try:
        def build(d):
            p = d / "model.safetensors"
            p.write_bytes(b"w" * 10)
            os.chmod(p, 0o600)  # what tempfile-and-rename writers leave
        d = cached_dir("toy", {"mode": 1}, build)
    finally:
        os.umask(old)
    assert stat.S_IMODE((d / "model.safetensors").stat().st_mode) == 0o644


def test_waiting_for_a_concurrent_build_says_so(caplog):
    import threading

    lock = cache.cache_root() / "toy" / ".abc.lock"
    held = threading.Event()

    def hold():
        with cache.file_lock(lock):
            held.set()
            time.sleep(1.0)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(5)
    with caplog.at_level("WARNING", logger="icml26.testbeds.cache"):
        with cache.file_lock(lock):
            pass
    t.join()
    assert "waiting for another process that is building toy/abc" in caplog.text


# code version: an artefact built by different code is rebuilt

def _module(tmp_path, monkeypatch, source, name="fpmod"):
    """Write and import a module the fingerprint treats as the package's own (PACKAGE patched to its name)."""
    import importlib
    import sys
    import time

    from icml26.testbeds import code_version

    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(code_version, "PACKAGE", name)
    monkeypatch.setattr(code_version, "PROCESS_START", time.time() + 5)  # as if this process started after the edit
    code_version._source_digest.cache_clear()
    sys.modules.pop(name, None)
    importlib.invalidate_caches()
    return importlib.import_module(name)


TRAIN_V1 = '''
SPLIT = ("a", "b")
REGISTRY = {"h": None}


def helper(x):
    return x * 2


class Scaler:
    def scale(self, x):
        return x + 1


def train(d):
    """Write the artefact."""
    from fpmod import helper as h  # an import inside the function is followed
    (d / "w.txt").write_text(str(h(3) + Scaler().scale(0)) + "".join(SPLIT))


def train_log(d):
    train(d)
'''


def test_an_artefact_built_by_different_code_is_rebuilt_and_the_change_named(tmp_path, monkeypatch, caplog):
    mod = _module(tmp_path, monkeypatch, TRAIN_V1)
    d = cached_dir("toy", {"c": 1}, lambda d: mod.train(d))
    rec = __import__("json").loads((d / cache.CODE).read_text())
    assert {"fpmod.train", "fpmod.helper", "fpmod.SPLIT", "fpmod.Scaler.scale"} <= set(rec["functions"])
    assert not any("lambda" in k for k in rec["functions"])  # the dispatching lambda is followed, not recorded
    first = (d / "w.txt").stat().st_mtime_ns
    # docstrings, comments and formatting do not count; a second call site with its own lambda is the same code
    mod = _module(tmp_path, monkeypatch, TRAIN_V1.replace('"""Write the artefact."""', '"""Other words."""  # c')
                  .replace("return x * 2", "return  x*2"))
    assert cached_dir("toy", {"c": 1}, lambda d: mod.train(d)) == d and (d / "w.txt").stat().st_mtime_ns == first
    assert cached_dir("toy", {"c": 1}, lambda folder: mod.train(folder)) == d
    assert (d / "w.txt").stat().st_mtime_ns == first
    # a changed statement in a function reached only through an import inside the build does count
    mod = _module(tmp_path, monkeypatch, TRAIN_V1.replace("return x * 2", "return x * 3"))
    with caplog.at_level("WARNING"):
        d2 = cached_dir("toy", {"c": 1}, lambda d: mod.train(d))
    assert (d2 / "w.txt").read_text() == "10ab"
    assert "built by different code (fpmod.helper changed since)" in caplog.text
    # so do a module-level data constant the build reads and a method of a class it uses
    mod = _module(tmp_path, monkeypatch, TRAIN_V1.replace("return x * 2", "return x * 3").replace('("a", "b")',
                                                                                               '("b", "a")'))
    assert (cached_dir("toy", {"c": 1}, lambda d: mod.train(d)) / "w.txt").read_text() == "10ba"
    mod = _module(tmp_path, monkeypatch, TRAIN_V1.replace("return x * 2", "return x * 3").replace('("a", "b")',
                  '("b", "a")').replace("return x + 1", "return x + 2"))
    assert (cached_dir("toy", {"c": 1}, lambda d: mod.train(d)) / "w.txt").read_text() == "11ba"


def test_an_interrupted_rebuild_keeps_the_old_artefact(tmp_path, monkeypatch):
    mod = _module(tmp_path, monkeypatch, TRAIN_V1)
    d = cached_dir("toy", {"c": 3}, lambda d: mod.train(d))
    mod = _module(tmp_path, monkeypatch, TRAIN_V1.replace("return x * 2", "return x * 3"))

    def crash(d):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cached_dir("toy", {"c": 3}, crash, code=(mod.train,))
    assert (d / "w.txt").read_text() == "7ab" and cache.manifest_problem(d) is None


def test_a_module_edited_after_the_process_started_is_recorded_as_unknown(tmp_path, monkeypatch):
    from icml26.testbeds import code_version

    mod = _module(tmp_path, monkeypatch, TRAIN_V1)
    monkeypatch.setattr(code_version, "PROCESS_START", 0.0)  # the file on disk is newer than the running code
    code_version._source_digest.cache_clear()
    fp = code_version.code_fingerprint(mod.train)
    assert fp["fpmod.train"].startswith("edited-after-start")


def test_an_artefact_without_a_code_record_is_adopted_once_and_then_checked(tmp_path, monkeypatch):
    """Built before code records were kept: nothing to compare with, so it is adopted under today's code (and from
    then on a code change rebuilds it); the override reuses a changed-code artefact."""
    mod = _module(tmp_path, monkeypatch, TRAIN_V1)
    d = cached_dir("toy", {"c": 2}, lambda d: mod.train(d))
    (d / cache.CODE).unlink()
    cache.write_manifest(d)
    assert cached_dir("toy", {"c": 2}, lambda d: mod.train(d)) == d and (d / cache.CODE).exists()
    assert cache.manifest_problem(d) is None  # the manifest lists the new record
    mod = _module(tmp_path, monkeypatch, TRAIN_V1.replace("return x * 2", "return x * 5"))
    monkeypatch.setenv(cache.IGNORE_CODE_ENV, "1")
    assert (cached_dir("toy", {"c": 2}, lambda d: mod.train(d)) / "w.txt").read_text() == "7ab"  # reused as built
    monkeypatch.delenv(cache.IGNORE_CODE_ENV)
    assert (cached_dir("toy", {"c": 2}, lambda d: mod.train(d)) / "w.txt").read_text() == "16ab"  # rebuilt


def test_a_read_only_cache_uses_an_old_code_artefact_as_built(tmp_path, monkeypatch, caplog):
    mod = _module(tmp_path, monkeypatch, TRAIN_V1)
    d = cached_dir("toy", {"c": 4}, lambda d: mod.train(d))
    mod = _module(tmp_path, monkeypatch, TRAIN_V1.replace("return x * 2", "return x * 3"))
    real_access = os.access
    monkeypatch.setattr(cache.os, "access", lambda p, m: False if str(p) == str(d.parent) else real_access(p, m))
    with caplog.at_level("WARNING"):
        assert cached_dir("toy", {"c": 4}, lambda d: mod.train(d)) == d
    assert (d / "w.txt").read_text() == "7ab" and "read-only" in caplog.text


def test_the_fingerprint_of_a_real_testbed_reaches_its_training_loop_data_and_not_the_cache():
    from icml26.testbeds import causal_lm
    from icml26.testbeds.code_version import code_fingerprint
    from icml26.testbeds.diffusion_lm import model

    fp = code_fingerprint(lambda d: causal_lm._build(causal_lm.TOY_4L, d))
    assert "icml26.testbeds.training.train_steps" in fp and "icml26.testbeds.llama.tiny_llama" in fp
    assert "icml26.testbeds.code_corpus.HELDOUT_DIRS" in fp  # the train / held-out split is data the build reads
    assert not any(k.startswith(("icml26.testbeds.cache", "icml26.testbeds.progress")) for k in fp)
    # the diffusion LM's task generators are imported inside make_task: they are its training data
    assert any(k.startswith("icml26.testbeds.diffusion_lm.tasks.") for k in code_fingerprint(model._build))


def test_is_cached_says_no_for_an_artefact_built_by_different_code(tmp_path, monkeypatch):
    """``icml26 prepare`` / ``reproduce`` decide what to build with ``is_cached``, which has no build callable: it
    re-hashes the recorded entries, so a code-stale artefact is reported as to build (not rebuilt in a job)."""
    mod = _module(tmp_path, monkeypatch, TRAIN_V1)
    cached_dir("toy", {"c": 5}, lambda d: mod.train(d))
    assert cache.is_cached("toy", {"c": 5})
    mod = _module(tmp_path, monkeypatch, TRAIN_V1.replace('"""Write the artefact."""', '"""Other words."""'))
    assert cache.is_cached("toy", {"c": 5})  # a docstring is not code
    mod = _module(tmp_path, monkeypatch, TRAIN_V1.replace("return x + 1", "return x + 4"))
    assert not cache.is_cached("toy", {"c": 5})  # a method the build reaches changed
    monkeypatch.setenv(cache.IGNORE_CODE_ENV, "1")
    assert cache.is_cached("toy", {"c": 5})
    monkeypatch.delenv(cache.IGNORE_CODE_ENV)
    cached_dir("toy", {"c": 5}, lambda d: mod.train(d))  # the rebuild
    assert cache.is_cached("toy", {"c": 5})
    _module(tmp_path, monkeypatch, TRAIN_V1.replace("def helper(x):\n    return x * 2\n", ""))
    assert not cache.is_cached("toy", {"c": 5})  # a recorded function that no longer exists
